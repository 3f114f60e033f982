// The worker-thread side of a rule compile (compile-job.ts): a thread that lives as long as sluice and
// takes one job at a time. Its domain chunks are serialized here (v8.serialize) and transferred, not
// copied, so that the event loop receives them at no cost and deserializes them one chunk per step
// (compiler.ts). A thread that lives on costs no start (tens of milliseconds of the event loop's time
// to create one and to join it when it ends).
import { serialize } from "node:v8";
import { parentPort } from "node:worker_threads";
import { runJob, type JobEntry, type JobInput, type JobOutput } from "./compile-job.js";

export interface ThreadRequest<S> {
  input: JobInput;
  source: S;
}

/** One job's answer: its output, or why it failed. */
export type ThreadAnswer = { id: number; out: JobOutput } | { id: number; error: string };

/** In a compile thread: runs each job on the entries of its source and posts its output. */
export function serveJobs<S>(entriesOf: (source: S) => { entries: JobEntry[]; warnings: string[] }): void {
  parentPort!.on("message", (req: ThreadRequest<S> & { id: number }) => {
    try {
      const { entries, warnings } = entriesOf(req.source);
      const transfer: ArrayBuffer[] = [];
      const out = runJob(req.input, entries, warnings, (c) => {
        const b = serialize(c);
        const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
        transfer.push(ab);
        return ab;
      });
      // A load refused keeps nothing: only the chunks of a valid one travel.
      parentPort!.postMessage({ id: req.id, out } satisfies ThreadAnswer, out.errors.length > 0 ? [] : transfer);
    } catch (err) {
      parentPort!.postMessage({ id: req.id, error: (err as Error).message } satisfies ThreadAnswer);
    }
  });
}
