import { decorator } from './decorator.js';
import { hotKey } from './hot-key.js';
import { hotKeyStore } from './hot-key-store.js';
import { hotSemaphore, hotWeightedSemaphore, readHeavy, writeHeavy } from './shared-hot-key.js';
import { latency } from './latency.js';
import { memory } from './memory.js';
import type { Scenario } from './scenario.js';
import { throughput } from './throughput.js';

/** In the order of the issue. */
export const SCENARIOS: readonly Scenario[] = [latency, throughput, hotKey, hotKeyStore, hotSemaphore, hotWeightedSemaphore, readHeavy, writeHeavy, decorator, memory];

export function scenarioById(id: string): Scenario {
  const scenario = SCENARIOS.find((s) => s.id === id);
  if (!scenario) throw new Error(`no scenario "${id}"; known: ${SCENARIOS.map((s) => s.id).join(', ')}`);
  return scenario;
}
