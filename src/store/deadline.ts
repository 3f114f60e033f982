// Time limits of store calls, not fooled by a busy event loop. A timer can fire while the reply
// already waits in the socket, unread because this process was busy (a long poll phase, a GC pause):
// then the store was not slow, and a failure-policy answer would be no faster than the real one. So a
// timer that fires gives the loop's I/O phase one turn (setImmediate runs after it) to read the reply
// before the call counts as timed out. withDeadline bounds one call (pings, script loads); ReplyWatch
// bounds the script calls of one connection.

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

/** A call older than this is answered by policy even while its node keeps answering others (an overloaded node). */
export const MAX_WAIT_FLOOR_MS = 1000;

interface Pending {
  /** performance.now() when the call left for the socket; -1 while it waits in this turn's write batch. */
  sentAt: number;
  /** The watch's lag credit when it left (see ReplyWatch.lag). */
  sentLag: number;
  /** Fails the call; undefined once it is settled (so the record holds no closure of a finished call). */
  reject: ((err: Error) => void) | undefined;
}

/**
 * The deadline of the calls on one connection, measured where it means something: from when a call
 * left for the socket, against the node's own silence, in time this process was free to read. Redis
 * answers one connection in order, so a call is late only when the node sent no reply at all for
 * `timeoutMs` after the call went out: a node that is down, paused or stuck. Replies that waited in the
 * socket while this process was busy (GC, a long event-loop turn, a backlog of its own writes) count
 * as the node's progress once read; and time this process could not run (its timer fired late: a busy
 * loop, or a host whose cores are all taken, where Redis starves too) does not count. Checked by one
 * timer per connection (no timer per call), after giving the loop's I/O phase a turn to read what is
 * waiting. A call still waiting after maxWaitMs of wall time fails even while replies keep coming
 * (bounded latency and memory).
 *
 * A call that timed out with nothing heard since it left makes the node silent (see `silent`) until its
 * next reply: the node has sent nothing for the store timeout while a call waited, so it has failed. The
 * calls waiting behind that one fail with it, and calls made meanwhile are answered by policy at once
 * (RedisNode): they could only wait behind the same silence, each for a timeout of its own.
 */
export class ReplyWatch {
  private readonly pending: Pending[] = [];
  private head = 0;
  /** Free time (performance.now() less the lag credit) of the last reply. */
  private lastReplyAt = -Infinity;
  /** Wall time (performance.now()) of the last reply. */
  private lastReplyWall = -Infinity;
  /** Wall time a call timed out with nothing heard since it left; undefined once a reply came. */
  private silentAt: number | undefined;
  /** Time this process was late to run its own timer, summed: not counted against the node. */
  private lag = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerDueAt = 0;
  private readonly maxWaitMs: number;

  /** onSilent: the node went silent (see `silent`). */
  constructor(
    private readonly timeoutMs: number,
    private readonly onSilent: () => void = () => {},
  ) {
    this.maxWaitMs = Math.max(MAX_WAIT_FLOOR_MS, 10 * timeoutMs);
  }

  /** A call timed out with nothing heard from the node since it left, and nothing has come since. */
  get silent(): boolean {
    return this.silentAt !== undefined;
  }

  /** Since when the node is silent (performance.now() ms); undefined when it is not. */
  get silentSince(): number | undefined {
    return this.silentAt;
  }

  /** How long the node has sent nothing, for logs (its silence began a timeout before it was found); 0 when it is not silent. */
  silentForMs(): number {
    return this.silentAt === undefined ? 0 : Math.round(performance.now() - this.silentAt + this.timeoutMs);
  }

  /** The node answered outside the watched calls (a probe, a new connection): not silent. */
  heard(): void {
    this.silentAt = undefined;
  }

  /** Calls of this connection waiting for a reply. */
  get inFlight(): number {
    let n = 0;
    for (let i = this.head; i < this.pending.length; i++) if (this.pending[i].reject) n++;
    return n;
  }

  /** `call` was just handed to the connection: written now (`sentNow`), or in this turn's batch (see sent()). */
  watch<T>(call: Promise<T>, sentNow: boolean): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const p: Pending = { sentAt: sentNow ? performance.now() : -1, sentLag: this.lag, reject };
      this.pending.push(p);
      // A reply of any kind (an error reply too) is the node's progress; a dropped connection fails every call anyway.
      call.then(
        (value) => this.replied(p) && resolve(value),
        (err) => this.replied(p) && reject(err),
      );
      if (this.timer === undefined) this.arm(this.timeoutMs);
    });
  }

  /**
   * Progress of the node; true when the call was still waiting (not timed out). The queue drops what
   * is settled at its front at once, so no call outlives its reply here.
   */
  private replied(p: Pending): boolean {
    this.lastReplyWall = performance.now();
    this.lastReplyAt = this.lastReplyWall - this.lag;
    this.silentAt = undefined;
    const waiting = p.reject !== undefined;
    p.reject = undefined;
    if (this.pending[this.head] === p) this.trim();
    return waiting;
  }

  /** The write batch holding the calls not sent yet went out. */
  sent(): void {
    const now = performance.now();
    for (let i = this.pending.length - 1; i >= this.head && this.pending[i].sentAt < 0; i--) {
      this.pending[i].sentAt = now;
      this.pending[i].sentLag = this.lag;
    }
  }

  /** Stops the timer (the connection is closing); calls still waiting are settled by the connection. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delayMs: number): void {
    this.timerDueAt = performance.now() + delayMs;
    this.timer = setTimeout(this.onTimer, delayMs);
  }

  private readonly onTimer = (): void => {
    this.timer = undefined;
    const firedAt = performance.now();
    this.lag += Math.max(firedAt - this.timerDueAt, 0);
    this.trim();
    if (this.head < this.pending.length) setImmediate(this.check, firedAt); // after the I/O phase read what waits
  };

  private readonly check = (firedAt: number): void => {
    const wall = performance.now();
    this.lag += wall - firedAt; // this turn's own work before the check ran
    const free = wall - this.lag;
    let nextDue = Infinity;
    // Set once a call timed out with nothing heard since it left: the node has failed, and every call behind it
    // (sent later, or still in a write batch) would only wait on the same silence, so it fails with it.
    let silent = false;
    for (let i = this.head; i < this.pending.length; i++) {
      const p = this.pending[i];
      const reject = p.reject;
      if (!reject) continue;
      if (!silent) {
        if (p.sentAt < 0) {
          nextDue = free + this.timeoutMs; // still in a write batch: its clock has not started
          break;
        }
        const due = Math.max(p.sentAt - p.sentLag, this.lastReplyAt) + this.timeoutMs;
        if (free < due && wall < p.sentAt + this.maxWaitMs) {
          // Later calls went out later: due no earlier.
          nextDue = Math.min(due, free + (p.sentAt + this.maxWaitMs - wall));
          break;
        }
        if (this.lastReplyWall < p.sentAt) {
          silent = true;
          if (this.silentAt === undefined) {
            this.silentAt = wall;
            this.onSilent();
          }
        }
      }
      p.reject = undefined;
      reject(new StoreTimeoutError(this.timeoutMs));
    }
    this.trim();
    if (nextDue !== Infinity && this.timer === undefined) this.arm(Math.max(1, nextDue - free));
  };
  /** Drops settled calls from the front; compacts now and then. */
  private trim(): void {
    while (this.head < this.pending.length && !this.pending[this.head].reject) this.head++;
    if (this.head === this.pending.length) {
      this.pending.length = 0;
      this.head = 0;
    } else if (this.head > 64 && this.head * 2 > this.pending.length) {
      this.pending.splice(0, this.head);
      this.head = 0;
    }
  }
}
