import { runConformanceSuite } from '@agentlink/conformance';
import { target } from './conformance-target.js';

runConformanceSuite(target);
