export { serveText } from './serve-text.js';
export { mockModel } from './mock-model.js';
