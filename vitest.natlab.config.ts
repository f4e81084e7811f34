import { defineConfig } from 'vitest/config';
import base, { ROOT_ONLY_TESTS } from './vitest.config.js';

/** The NAT lab alone (root: network namespaces and nftables): `pnpm test:natlab`. (mergeConfig would add the lists.) */
export default defineConfig({ ...base, test: { ...base.test, include: ROOT_ONLY_TESTS, exclude: ['**/node_modules/**'] } });
