export { runConformanceSuite } from './suite.js';
export { crossedDial } from './crossed-dial.js';
export type { CrossedDial, CrossedDialSide } from './crossed-dial.js';
export { runHostileSuite } from './hostile/hostile-suite.js';
export { HOSTILE_BOUNDS } from './hostile/bounds.js';
export { installConformanceHandlers } from './handlers.js';
export type { ConformanceTarget, TransportFactory } from './target.js';
