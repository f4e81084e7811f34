export { startRendezvous } from './rendezvous.js';
export type { Rendezvous, RendezvousOptions } from './rendezvous.js';
export { DEFAULT_CONFIG, configFrom } from './config.js';
export type { RendezvousConfig } from './config.js';
export { MemoryRegistry } from './registry.js';
export type { RegistryStore, StoredRecord } from './registry.js';
export { jsonLogger } from './log.js';
export type { Logger } from './log.js';
