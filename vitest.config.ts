import { defineConfig } from 'vitest/config';
import type { Reporter, TestModule } from 'vitest/node';

/** Ends the run with one plain line, `N passed, N failed`, that any CI log reader understands. */
class PlainSummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') counts.failed++;
        else counts.skipped++;
      }
    }
    const skipped = counts.skipped > 0 ? `, ${counts.skipped} skipped` : '';
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed${skipped}\n`);
  }
}

/**
 * Suites with needs of their own, run by CI beside `pnpm test` (which any user runs on a fresh machine):
 * `pnpm test:natlab` needs root (network namespaces, nftables); `pnpm test:netlab` too (namespaces, TUN); `pnpm test:interop` runs foreign clients and tools
 * from Debian packages (curl, turnutils_stunclient, promtool), which its script installs when missing;
 * `pnpm test:redis` the rendezvous' Redis store and clusters against Debian's redis-server (installed when missing);
 * `pnpm test:heavy` the runs of minutes.
 */
export const SEPARATE_SUITES = {
  natlab: ['apps/rendezvous/test/nat-lab.test.ts'],
  /** The kernel-level network lab (root: namespaces, TUN): traffic crosses the impairment as configured. */
  netlab: ['benchmarks/netlab/netlab.test.ts'],
  interop: ['packages/*/test/**/*.interop.test.ts', 'apps/*/test/**/*.interop.test.ts'],
  /** Against a real Redis (Debian's redis-server, started by the tests on loopback): `pnpm test:redis`. */
  redis: ['apps/*/test/**/*.redis.test.ts'],
  /** Runs of minutes (10,000 registrations, agentbench end to end): `pnpm test:heavy`. */
  heavy: ['apps/rendezvous/test/scale.test.ts', 'packages/agentbench/test/agentbench.test.ts'],
};

export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'apps/*/test/**/*.test.ts'],
    exclude: ['**/node_modules/**', ...Object.values(SEPARATE_SUITES).flat()],
    pool: 'forks',
    // Leak tests collect garbage before they measure, so they see leaks rather than the collector's timing.
    execArgv: ['--expose-gc'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The `source` condition above also reaches dependencies: eventsource-parser (under the AI SDK) publishes
    // its TypeScript source under it, which node cannot load, so vite transforms it and the AI SDK that imports it.
    server: { deps: { inline: ['eventsource-parser', /@ai-sdk\//, /node_modules\/ai\//] } },
    reporters: ['default', new PlainSummaryReporter()],
  },
});
