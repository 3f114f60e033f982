// The time limit of one store call, not fooled by a busy event loop. A timer can fire while the reply
// already waits in the socket, unread because this process was busy (a long poll phase, a GC pause):
// then the store was not slow, and a failure-policy answer would be no faster than the real one. So a
// timer that fires gives the loop's I/O phase one turn (setImmediate runs after it) to read the reply
// before the call counts as timed out.

export class StoreTimeoutError extends Error {
  constructor(ms: number) {
    super(`timed out after ${ms} ms`);
    this.name = "StoreTimeoutError";
  }
}

export function withDeadline<T>(call: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (settled) return;
        settled = true;
        reject(new StoreTimeoutError(ms));
      });
    }, ms);
    call.then(
      (value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (err) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
