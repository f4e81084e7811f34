/** `calls` sequential calls: CPU µs (this process, all threads) and wall µs per call. */
export async function measure(call: () => Promise<void>, calls: number): Promise<{ cpuUs: number; wallUs: number }> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < calls; i++) await call();
  const wallUs = ((performance.now() - started) * 1000) / calls;
  const used = process.cpuUsage(cpu);
  return { cpuUs: (used.user + used.system) / calls, wallUs };
}
