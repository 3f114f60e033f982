// What `sluice serve` opened, closed in reverse (last opened, first closed): a failed start and a shutdown
// close through the same list, so the order is written once, where each part is opened.
import type { Logger } from "pino";

/** Closes one part; `graceLeftMs()` is what remains of the shutdown grace period. */
type Closer = (graceLeftMs: () => number) => unknown;

export class Closers {
  private readonly list: { name: string; close: Closer }[] = [];

  constructor(private readonly logger: Logger) {}

  /** Call as soon as `name` is open. */
  add(name: string, close: Closer): void {
    this.list.push({ name, close });
  }

  /** Closes everything opened, last first, within `graceMs` where a part takes a time; one that fails does not keep the rest open. */
  async closeAll(graceMs: number): Promise<void> {
    const ends = performance.now() + graceMs;
    const left = () => Math.max(0, ends - performance.now());
    for (const { name, close } of this.list.splice(0).reverse()) {
      try {
        await close(left);
      } catch (err) {
        this.logger.warn({ err, part: name }, "closing failed");
      }
    }
  }
}
