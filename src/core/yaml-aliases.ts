// YAML aliases in rule files, bounded as the reference bounds them. envoyproxy/ratelimit reads rule files with Go's
// yaml.v2, which refuses a document whose alias expansion is out of proportion ("document contains excessive
// aliasing": an anchor bomb of a few hundred bytes expands to millions of nodes) and an anchor that contains an alias
// to itself. The same rule is applied here, counted the same way, before the rule walker expands anything; files
// the reference accepts are accepted. It also resolves every alias once (the yaml library's Alias.resolve walks
// the whole document on each call).
import { isAlias, isMap, isPair, isSeq, visit, type Alias, type Document, type Node } from "yaml";

/** yaml.v2's thresholds (decode.go): up to 400,000 decodes 99 % may come from aliases, from 4,000,000 only 10 %. */
const RATIO_RANGE_LOW = 400_000;
const RATIO_RANGE_HIGH = 4_000_000;

function allowedAliasRatio(decodes: number): number {
  if (decodes <= RATIO_RANGE_LOW) return 0.99;
  if (decodes >= RATIO_RANGE_HIGH) return 0.1;
  return 0.99 - 0.89 * ((decodes - RATIO_RANGE_LOW) / (RATIO_RANGE_HIGH - RATIO_RANGE_LOW));
}

export interface AliasCheck {
  /** Each alias's node: the last anchor of its name before it, in document order (as the yaml library resolves it). */
  targets: Map<Alias, Node | undefined>;
  /** Why the reference would refuse the document, with the alias where it stopped; absent: accepted. */
  problem?: { message: string; at: Alias };
}

/** undefined: the document has no aliases (nothing to bound or resolve). */
export function checkAliases(doc: Document): AliasCheck | undefined {
  const targets = new Map<Alias, Node | undefined>();
  const anchors = new Map<string, Node>();
  visit(doc, {
    Node(_key, node) {
      if (isAlias(node)) targets.set(node, anchors.get(node.source));
      else if (node.anchor) anchors.set(node.anchor, node);
    },
  });
  if (targets.size === 0) return undefined;
  const problem = expansionProblem(doc.contents, targets);
  return problem ? { targets, problem } : { targets };
}

/**
 * Walks the document as yaml.v2 decodes it (every node, each alias's target again under it), counting decodes and
 * the decodes under an alias, and stops where yaml.v2 would fail. Iterative: a deep document cannot overflow the stack.
 */
function expansionProblem(root: unknown, targets: Map<Alias, Node | undefined>): AliasCheck["problem"] {
  let decodes = 0;
  let aliased = 0;
  /** Aliases being expanded (yaml.v2's d.aliases): one met again inside its own expansion contains itself. */
  const open = new Set<Alias>();
  type Frame = { node: unknown; depth: number } | { leave: Alias };
  const stack: Frame[] = [{ node: root, depth: 0 }];
  /** The aliases whose expansions are being walked, and the last one met: where an error points. */
  const within: Alias[] = [];
  let last: Alias | undefined;
  while (stack.length > 0) {
    const f = stack.pop()!;
    if ("leave" in f) {
      open.delete(f.leave);
      within.pop();
      continue;
    }
    const { node, depth } = f;
    if (node === null || node === undefined) continue;
    decodes++;
    if (depth > 0) aliased++;
    if (aliased > 100 && decodes > 1000 && aliased / decodes > allowedAliasRatio(decodes)) {
      return { message: "document contains excessive aliasing", at: within[within.length - 1] ?? last! };
    }
    if (isAlias(node)) {
      if (open.has(node)) return { message: `anchor '${node.source}' value contains itself`, at: node };
      open.add(node);
      within.push(node);
      last = node;
      stack.push({ leave: node }, { node: targets.get(node), depth: depth + 1 });
    } else if (isMap(node)) {
      // Pushed in reverse: popped, and so counted, in document order.
      for (let i = node.items.length - 1; i >= 0; i--) {
        const pair = node.items[i];
        if (!isPair(pair)) continue;
        stack.push({ node: pair.value, depth }, { node: pair.key, depth });
      }
    } else if (isSeq(node)) {
      for (let i = node.items.length - 1; i >= 0; i--) stack.push({ node: node.items[i], depth });
    }
  }
  return undefined;
}
