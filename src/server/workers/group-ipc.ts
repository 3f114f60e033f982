// Questions the primary asks its workers over the cluster IPC channel (/metrics, /readyz, /rules, the
// reference's /json and /healthcheck), and the workers' answers. Every question has a deadline: a worker
// that is busy, stuck or gone never holds an admin request longer than that.
import cluster, { type Worker } from "node:cluster";

type Question = "metrics" | "ready" | "rules" | "rlqs" | "rlconfig" | "stats" | "health" | "json" | "route";

interface Ask {
  sluice: "ask";
  id: number;
  question: Question;
  /** For "json": the request body; for "route": the GET route's path and query (JSON); base64. */
  body?: string;
}

interface Answer {
  sluice: "answer";
  id: number;
  ok: boolean;
  value?: unknown;
  error?: string;
}

const isAsk = (m: unknown): m is Ask => typeof m === "object" && m !== null && (m as Ask).sluice === "ask";
const isAnswer = (m: unknown): m is Answer => typeof m === "object" && m !== null && (m as Answer).sluice === "answer";

class WorkerTimeout extends Error {}

let nextId = 1;
/** id -> pending question; one table for all workers (ids are unique in the primary). */
const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout; worker: Worker }>();
let listening = false;

function listen(): void {
  if (listening) return;
  listening = true;
  cluster.on("message", (_worker, m) => {
    if (!isAnswer(m)) return;
    const p = pending.get(m.id);
    if (!p) return; // answered after its deadline
    pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.ok) p.resolve(m.value);
    else p.reject(new Error(m.error ?? "worker failed to answer"));
  });
  // A worker that dies fails its open questions at once instead of at their deadline.
  cluster.on("exit", (worker) => {
    for (const [id, p] of pending) {
      if (p.worker !== worker) continue;
      pending.delete(id);
      clearTimeout(p.timer);
      p.reject(new Error("worker exited"));
    }
  });
}

/** In the primary: asks one worker; rejects with WorkerTimeout after timeoutMs, or when the worker exits. */
export function askWorker(worker: Worker, question: Question, timeoutMs: number, body?: Buffer): Promise<unknown> {
  listen();
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new WorkerTimeout(`worker ${worker.id} did not answer '${question}' within ${timeoutMs} ms`));
    }, timeoutMs);
    pending.set(id, { resolve, reject, timer, worker });
    const ask: Ask = { sluice: "ask", id, question, ...(body ? { body: body.toString("base64") } : {}) };
    try {
      worker.send(ask, (err: Error | null) => {
        if (!err) return;
        pending.delete(id);
        clearTimeout(timer);
        reject(err);
      });
    } catch (err) {
      pending.delete(id);
      clearTimeout(timer);
      reject(err as Error);
    }
  });
}

export type Answers = { [Q in Question]: (body: Buffer) => unknown };

/** In a worker: answers the primary's questions from these handlers. */
export function answerQuestions(handlers: Answers): void {
  process.on("message", (m: unknown) => {
    if (!isAsk(m)) return;
    const reply = (a: Omit<Answer, "sluice" | "id">) => {
      if (process.connected) process.send?.({ sluice: "answer", id: m.id, ...a } satisfies Answer);
    };
    const handler = handlers[m.question];
    if (!handler) return reply({ ok: false, error: `unknown question '${m.question}'` });
    Promise.resolve()
      .then(() => handler(Buffer.from(m.body ?? "", "base64")))
      .then(
        (value) => reply({ ok: true, value }),
        (err: Error) => reply({ ok: false, error: err.message }),
      );
  });
}
