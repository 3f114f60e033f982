// The table of requests and what envoy/envoy.yaml makes of them: the route Envoy picks and the descriptors
// it sends (or its own answer). test/integration/envoy-edge.test.ts checks the emulation
// (test/helpers/envoy-actions.ts) against it; test/integration/envoy-oracle.test.ts checks Envoy 1.40 itself.
import type { HttpRequest } from "./envoy-actions.js";

export interface EdgeRow {
  name: string;
  req: HttpRequest;
  /** The route's name, or "(none)" when Envoy answers itself. */
  route: string;
  /** Each descriptor as [key, value] entries; [] when Envoy makes no call. */
  descriptors: [string, string][][];
  /** Envoy's own answer, when it gives one. */
  reply?: { status: number; location?: string };
}

export const get = (p: string, clientIp: string, headers: Record<string, string | string[]> = {}): HttpRequest => ({
  method: "GET",
  path: p,
  clientIp,
  headers,
});
export const login = (account: string | undefined, clientIp: string): HttpRequest => ({
  method: "POST",
  path: "/login",
  clientIp,
  headers: account === undefined ? {} : { "x-login-account": account },
});

export const EDGE_ROWS: EdgeRow[] = [
  {
    name: "anonymous page: the IP only",
    req: get("/orders", "203.0.113.7"),
    route: "default",
    descriptors: [[["remote_address", "203.0.113.7"]]],
  },
  {
    name: "signed-in with an API key on the pro plan: IP, account, key, key+plan",
    req: get("/orders?page=2", "203.0.113.7", { "x-account-id": "acct-1", "X-Api-Key": "key-1", "x-plan": "pro" }),
    route: "default",
    descriptors: [
      [["remote_address", "203.0.113.7"]],
      [["account", "acct-1"]],
      [["api_key", "key-1"]],
      [
        ["api_key", "key-1"],
        ["plan", "pro"],
      ],
    ],
  },
  {
    name: "an API key without a plan: the key+plan descriptor is dropped whole, the key's own stays",
    req: get("/orders", "203.0.113.7", { "x-api-key": "key-1" }),
    route: "default",
    descriptors: [[["remote_address", "203.0.113.7"]], [["api_key", "key-1"]]],
  },
  {
    name: "a plan without an API key: nothing for the plan",
    req: get("/orders", "203.0.113.7", { "x-plan": "pro" }),
    route: "default",
    descriptors: [[["remote_address", "203.0.113.7"]]],
  },
  {
    name: "search: the endpoint's global counter too",
    req: get("/search?q=shoes", "203.0.113.8", { "x-account-id": "acct-2" }),
    route: "search",
    descriptors: [[["remote_address", "203.0.113.8"]], [["account", "acct-2"]], [["generic_key", "search"]]],
  },
  {
    name: "search below /search/: same route",
    req: get("/search/suggest", "203.0.113.8"),
    route: "search",
    descriptors: [[["remote_address", "203.0.113.8"]], [["generic_key", "search"]]],
  },
  {
    name: "/searchable is another endpoint, not search",
    req: get("/searchable", "203.0.113.8"),
    route: "default",
    descriptors: [[["remote_address", "203.0.113.8"]]],
  },
  {
    name: "path tricks still reach the search limits (normalized, merged slashes, any case)",
    req: get("//static/../SEARCH?q=x", "203.0.113.8"),
    route: "search",
    descriptors: [[["remote_address", "203.0.113.8"]], [["generic_key", "search"]]],
  },
  {
    name: "an escaped slash in the path: Envoy redirects (307) to the unescaped, normalized path, no call",
    req: get("/static%2F..%2Fsearch?q=%2F", "203.0.113.8"),
    route: "(none)",
    descriptors: [],
    reply: { status: 307, location: "/search?q=%2F" },
  },
  {
    name: "an escaped backslash, any case, is a slash too: redirected",
    req: get("/login%5c", "203.0.113.8"),
    route: "(none)",
    descriptors: [],
    reply: { status: 307, location: "/login/" },
  },
  {
    name: "a backslash is a slash: /x\\..\\search is /search",
    req: get("/x\\..\\search", "203.0.113.8"),
    route: "search",
    descriptors: [[["remote_address", "203.0.113.8"]], [["generic_key", "search"]]],
  },
  {
    name: "escaped unreserved characters are decoded before routing: /a/%2e%2e/%4Cogin is /Login, the login route",
    req: get("/a/%2e%2e/%4Cogin", "198.51.100.1", { "x-login-account": "alice" }),
    route: "login",
    descriptors: [[["remote_address", "198.51.100.1"]], [["login_account", "alice"]]],
  },
  {
    name: "a separator other than / after /login is another path: /login;x is the default route",
    req: get("/login;x", "198.51.100.1", { "x-login-account": "alice", "x-account-id": "acct-1" }),
    route: "default",
    descriptors: [[["remote_address", "198.51.100.1"]], [["account", "acct-1"]]],
  },
  {
    name: "a fragment in the target is refused (400), no call",
    req: get("/search#x", "203.0.113.8"),
    route: "(none)",
    descriptors: [],
    reply: { status: 400 },
  },
  {
    name: "an empty header is present: its entry has the empty value (one counter for every such client)",
    req: get("/orders", "203.0.113.7", { "x-api-key": "", "x-plan": "free" }),
    route: "default",
    descriptors: [
      [["remote_address", "203.0.113.7"]],
      [["api_key", ""]],
      [
        ["api_key", ""],
        ["plan", "free"],
      ],
    ],
  },
  {
    name: "a header sent twice: its first value, trimmed",
    req: get("/orders", "203.0.113.7", { "x-account-id": [" acct-1 ", "acct-2"] }),
    route: "default",
    descriptors: [[["remote_address", "203.0.113.7"]], [["account", "acct-1"]]],
  },
  {
    name: "an absolute-form target is routed on its path",
    req: get("http://example.com/Search?q=1", "203.0.113.8"),
    route: "search",
    descriptors: [[["remote_address", "203.0.113.8"]], [["generic_key", "search"]]],
  },
  {
    name: "login: per IP, and per account tried with no IP in it",
    req: login("alice", "198.51.100.1"),
    route: "login",
    descriptors: [[["remote_address", "198.51.100.1"]], [["login_account", "alice"]]],
  },
  {
    name: "login without the account header: the IP only",
    req: login(undefined, "198.51.100.1"),
    route: "login",
    descriptors: [[["remote_address", "198.51.100.1"]]],
  },
  {
    name: "a spoofed x-forwarded-for changes nothing: the TCP peer is counted",
    req: get("/orders", "198.51.100.9", { "x-forwarded-for": "10.9.9.9" }),
    route: "default",
    descriptors: [[["remote_address", "198.51.100.9"]]],
  },
  {
    name: "IPv6 client: the address without brackets or port",
    req: get("/orders", "2001:db8::42"),
    route: "default",
    descriptors: [[["remote_address", "2001:db8::42"]]],
  },
];
