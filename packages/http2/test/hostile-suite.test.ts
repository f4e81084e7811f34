import { runHostileSuite } from '@agentlink/conformance';
import { target } from './conformance-target.js';

// Its own file, so its own process: each attack starts from a test process no other suite has used.
runHostileSuite(target);
