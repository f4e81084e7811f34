/** The parts of @msimerson/stun (which ships no types) that agentlink uses. */
declare module '@msimerson/stun' {
  interface StunAttribute {
    readonly type: number;
    readonly value: { address: string; port: number; family: number };
  }
  interface StunMessage {
    readonly type: number;
    readonly transactionId: Buffer;
    getAttribute(type: number): StunAttribute | undefined;
    addXorAddress(address: string, port: number): void;
    addSoftware(software: string): void;
    addFingerprint(): void;
    toBuffer(): Buffer;
  }
  interface StunServer {
    on(event: 'bindingRequest', listener: (request: StunMessage, rinfo: { address: string; port: number }) => void): this;
    on(event: 'error', listener: (error: Error) => void): this;
    once(event: 'listening', listener: () => void): this;
    listen(port: number, address: string, callback?: () => void): void;
    send(message: StunMessage, port: number, address: string, callback?: (error?: Error) => void): void;
    close(): void;
  }
  export function createMessage(type: number, transaction?: Buffer): StunMessage;
  export function createServer(options: { type: 'udp4' | 'udp6'; socket?: import('node:dgram').Socket }): StunServer;
  export function decode(message: Buffer): StunMessage;
  export const constants: {
    STUN_BINDING_REQUEST: number;
    STUN_BINDING_RESPONSE: number;
    STUN_ATTR_XOR_MAPPED_ADDRESS: number;
    STUN_ATTR_MAPPED_ADDRESS: number;
    STUN_EVENT_BINDING_REQUEST: 'bindingRequest';
  };
}
