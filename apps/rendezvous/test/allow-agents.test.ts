import { AgentError } from '@agentlink/core';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, rendezvous, wsClient } from './helpers.js';

afterEach(cleanup);

describe('rendezvous allow list', () => {
  it('serves the listed agents and refuses others with PERMISSION_DENIED', async () => {
    const member = await wsClient();
    const stranger = await wsClient();
    const r = await rendezvous({ allowAgents: [member.id] });
    expect(await member.send(r.address, 'rdv.info')).toMatchObject({ relay: true });
    const refused = await stranger.send(r.address, 'rdv.info').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AgentError);
    expect(refused).toMatchObject({ code: 'PERMISSION_DENIED' });
  });
});
