import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, rendezvous, wsClient } from './helpers.js';
import { requireTool, run } from './tools.js';

afterEach(cleanup);

describe('rendezvous with standard tools', () => {
  it("answers coturn's turnutils_stunclient on both STUN ports with its own address", async () => {
    requireTool('turnutils_stunclient', 'coturn');
    const r = await rendezvous();
    for (const port of r.stunPorts) {
      const { code, stdout, stderr } = await run('turnutils_stunclient', ['-p', String(port), '127.0.0.1']);
      expect(code, stderr).toBe(0);
      // e.g. "UDP reflexive addr: 127.0.0.1:41234"
      const mapped = /UDP reflexive addr: (\d+\.\d+\.\d+\.\d+):(\d+)/.exec(stdout);
      expect(mapped, stdout).not.toBeNull();
      expect(mapped![1]).toBe('127.0.0.1');
      expect(Number(mapped![2])).toBeGreaterThan(0);
    }
    expect(r.metrics.stunCount('answered')).toBeGreaterThanOrEqual(2);
  });

  it('serves /metrics that promtool accepts, with HELP and TYPE for every family and the agent refusals', async () => {
    requireTool('promtool', 'prometheus');
    const r = await rendezvous();
    const client = await wsClient();
    await client.send(r.address, 'rdv.info');
    const metrics = await (await fetch(`http://127.0.0.1:${r.httpPort}/metrics`)).text();
    const { code, stdout, stderr } = await run('promtool', ['check', 'metrics'], metrics);
    expect({ code, problems: `${stdout}${stderr}`.trim() }).toEqual({ code: 0, problems: '' });
    const families = new Set([...metrics.matchAll(/^([a-z_]+)(?:\{[^}]*\})? /gm)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, '')));
    for (const family of families) {
      expect(metrics, family).toContain(`# HELP ${family} `);
      expect(metrics, family).toContain(`# TYPE ${family} `);
    }
    expect(metrics).toContain('# TYPE agentlink_refusals_total counter');
    expect(metrics).toContain('# TYPE rendezvous_stun_datagrams_total counter');
  });
});
