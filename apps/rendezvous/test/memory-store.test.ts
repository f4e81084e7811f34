import { MemoryRegistry } from '../src/index.js';
import { registryStoreConformance } from './store-conformance.js';

registryStoreConformance('memory', async () => {
  const store = new MemoryRegistry();
  return { store, twin: store, close: () => store.close() };
});
