import { defineConfig } from 'vitest/config';
import base, { SEPARATE_SUITES } from './vitest.config.js';

/** One of the separate suites alone (`SUITE=natlab|netlab|interop|redis|heavy`); mergeConfig would add the lists, not replace them. */
const suite = (process.env.SUITE ?? 'natlab') as keyof typeof SEPARATE_SUITES;
if (!(suite in SEPARATE_SUITES)) throw new Error(`SUITE must be one of ${Object.keys(SEPARATE_SUITES).join(', ')}`);
export default defineConfig({ ...base, test: { ...base.test, include: SEPARATE_SUITES[suite], exclude: ['**/node_modules/**'] } });
