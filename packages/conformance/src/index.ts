export { runConformanceSuite } from './suite.js';
export { installConformanceHandlers } from './handlers.js';
export type { ConformanceTarget, TransportFactory } from './target.js';
