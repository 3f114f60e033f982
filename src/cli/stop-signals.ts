// SIGTERM and SIGINT for `sluice serve`, caught from its first line (bin.ts, before the rest of sluice loads) and
// remembered: a stop that arrives while sluice starts (modules loading, rules compiling, ports opening) ends it
// cleanly, with exit 0, once what it opened is closed, instead of ending it by the signal. Each signal is caught
// once: a second one ends the process at once, as without sluice's handler.
export type StopSignal = "SIGTERM" | "SIGINT";

let caught: StopSignal | undefined;
let installed = false;
const waiting: ((signal: StopSignal) => void)[] = [];

/** Catches the stop signals from now on; again is a no-op. */
export function catchStopSignals(): void {
  if (installed) return;
  installed = true;
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => stop(signal));
}

function stop(signal: StopSignal): void {
  if (caught) return;
  caught = signal;
  for (const resolve of waiting.splice(0)) resolve(signal);
}

/** The stop signal that arrived, if one did. */
export function stopRequested(): StopSignal | undefined {
  return caught;
}

/** Resolves with the first stop signal (at once if it arrived already). */
export function untilStopped(): Promise<StopSignal> {
  return caught ? Promise.resolve(caught) : new Promise((resolve) => waiting.push(resolve));
}
