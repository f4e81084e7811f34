export { Reach, reach } from './reach.js';
export type { PathEvent, ReachOptions } from './reach.js';
export { MAX_RECORD_BYTES, signRecord, verifyRecord } from './record.js';
export type { NatType, PeerRecord, SignedRecord } from './record.js';
export { discoverNat, localAddresses } from './nat-type.js';
export type { NatDiscovery } from './nat-type.js';
export { StunClient, parseBindingResponse, startStunServer } from './stun.js';
export type { HostPort, RawDatagramSocket } from './stun.js';
export { secureTunnel } from './secure-tunnel.js';
