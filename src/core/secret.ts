// A value that must never reach a log line, a metrics label or an admin page: every way of
// printing it prints "[redacted]"; only reveal() gives the value, at the one place that needs it. And the
// values of secret descriptor keys (an API key, a token), which sluice writes only as a keyed hash.
import { createHmac } from "node:crypto";
import { inspect } from "node:util";
import { descriptorPath } from "./descriptor-path.js";

const REDACTED = "[redacted]";

export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}

/** Hex digits of a secret value's keyed hash as logs, metrics, /top and explain show it. */
const SHOWN_HEX = 12;
/** In store keys: 128 bits, so two values never share a counter (the shown hash is its first digits). */
const KEY_HEX = 32;
/** learnSteps()'s work in one step: 256 values hashed (about 1 ms), or ten times as many nodes only visited. */
const LEARN_SLICE = 2560;
/** A value hashed costs as much as this many nodes visited. */
const HASH_WORK = 10;
/** Hashes remembered (a hot client's value is hashed once); past it the cache starts again. */
const CACHE_MAX = 10_000;

/** `#` + the first 12 hex digits of HMAC-SHA256(hashKey, value): a secret value as it is shown. */
export function secretHash(hashKey: string, value: string): string {
  return "#" + createHmac("sha256", hashKey).update(value).digest("hex").slice(0, SHOWN_HEX);
}

/** What learn() walks of a rule set (rules/model.ts RuleSet), as core sees it. */
interface PathNode {
  key: string;
  value: string;
  limits: readonly object[];
  children: PathLevel;
}
interface PathLevel {
  exact: Map<string, Map<string, PathNode>>;
  wildcards: Map<string, PathNode[]>;
  keyOnly: Map<string, PathNode>;
}

/**
 * The values of descriptor keys named secret (SLUICE_TOP_SECRET_KEYS), as a keyed hash wherever sluice writes
 * them: store keys (core/keys.ts), logs, metrics, explain and /top. The hash key (SLUICE_TOP_HASH_KEY) is the
 * same on every instance, so one value is one counter and shows the same everywhere.
 */
export class SecretValues {
  private readonly keys: ReadonlySet<string>;
  private readonly hashKey: string;
  private readonly cache = new Map<string, string>();
  /** Limits whose rule path holds a secret value (learn()): the path as shown. A limit's shown path depends on its own path alone, so entries never go stale. */
  private readonly paths = new WeakMap<object, string>();
  /** Compiled domain trees already walked by learn(). */
  private readonly learned = new WeakSet<object>();

  constructor(keys: readonly string[], hashKey: Secret | string) {
    this.keys = new Set(keys);
    this.hashKey = typeof hashKey === "string" ? hashKey : hashKey.reveal();
  }

  /** Some key is secret. */
  get any(): boolean {
    return this.keys.size > 0;
  }

  isSecret(key: string): boolean {
    return this.keys.has(key);
  }

  /** A value as store keys hold it: `#` + 32 hex digits (the shown hash is its start). */
  inKey(value: string): string {
    let h = this.cache.get(value);
    if (h === undefined) {
      if (this.cache.size >= CACHE_MAX) this.cache.clear();
      h = "#" + createHmac("sha256", this.hashKey).update(value).digest("hex").slice(0, KEY_HEX);
      this.cache.set(value, h);
    }
    return h;
  }

  /** A value as logs, metrics, /top and explain show it: `#` + 12 hex digits. */
  shown(value: string): string {
    return this.inKey(value).slice(0, 1 + SHOWN_HEX);
  }

  /** A value under `key` as shown: hashed when the key is secret. */
  shownValue(key: string, value: string): string {
    return this.keys.has(key) ? this.shown(value) : value;
  }

  /** A limit's rule path as shown: a value of a secret key written in the rules is hashed (learned by learn()). */
  path(limit: { path: string }): string {
    return this.paths.get(limit) ?? limit.path;
  }

  /**
   * Finds the limits of a rule set whose path holds a value of a secret key (`key: api_key, value: "..."` in a
   * rule file), and keeps their paths as shown. Called at each load, before the rules serve. A domain already
   * walked (the same compiled tree: a reload keeps the domains it did not change) is not walked again, and a
   * walk builds strings only on branches that hold a secret value: a reload costs what changed, not the rules.
   */
  learn(rules: { domains: Map<string, { domain: string; root: PathLevel }> }): void {
    for (const d of rules.domains.values()) for (const _ of this.learnSteps(d));
  }

  /**
   * learn() for one domain in slices: each step does at most LEARN_SLICE units of work (a node visited is one, a
   * value hashed HASH_WORK), so a reload of a domain of 100,000 secret values can run it one step per event-loop
   * turn (rules/compiler.ts). The domain counts as walked only once the last step ran.
   */
  *learnSteps(d: { domain: string; root: PathLevel }): Generator<void, void, undefined> {
    if (this.keys.size === 0 || this.learned.has(d.root)) return;
    yield* this.walk(d.root, d.domain, [], undefined, { work: 0 });
    this.learned.add(d.root);
  }

  /** `above`: the nodes from the domain down to this level; `shown`: their path as shown, undefined while it holds no secret. */
  private *walk(level: PathLevel, domain: string, above: PathNode[], shown: string | undefined, slice: { work: number }): Generator<void, void, undefined> {
    for (const n of nodesOf(level)) {
      const secret = this.keys.has(n.key) && n.value !== "" && n.value !== "*";
      const work = secret ? HASH_WORK : 1;
      slice.work += work;
      if (slice.work > LEARN_SLICE) {
        slice.work = work; // this node's, in the next step
        yield;
      }
      let childShown = shown === undefined ? undefined : descriptorPath(shown, n.key, n.value);
      if (secret) {
        // The first secret on this branch: only now is the path above it built.
        const prefix = shown ?? above.reduce((p, a) => descriptorPath(p, a.key, a.value), domain);
        childShown = descriptorPath(prefix, n.key, this.shown(n.value));
      }
      if (childShown !== undefined) for (const l of n.limits) this.paths.set(l, childShown);
      above.push(n);
      yield* this.walk(n.children, domain, above, childShown, slice);
      above.pop();
    }
  }
}

/** A level's nodes: exact values, wildcards, then the key-only ones (a compiled tree does not change). */
function* nodesOf(level: PathLevel): Generator<PathNode, void, undefined> {
  for (const byValue of level.exact.values()) yield* byValue.values();
  for (const list of level.wildcards.values()) yield* list;
  yield* level.keyOnly.values();
}

/** No key is secret. */
export const NO_SECRETS = new SecretValues([], "");
