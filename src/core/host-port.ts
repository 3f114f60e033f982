// The one host:port reader of settings: host:port or [v6]:port, brackets dropped from the host. Callers
// word their own error (naming their flag or variable) when it returns undefined.

export interface HostPort {
  host: string;
  port: number;
}

/**
 * `emptyHost`: ":9090" means every interface (a Go listen address); `zeroPort`: port 0 (pick a free one).
 * A host holds no space, '/', '@' or unbracketed ':'.
 */
export function parseHostPort(raw: string, opts: { emptyHost?: boolean; zeroPort?: boolean } = {}): HostPort | undefined {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s:/@[\]]*):(\d{1,5})$/.exec(raw);
  if (!m || (m[1] === "" && !opts.emptyHost)) return undefined;
  const port = Number(m[2]);
  if (port > 65535 || (port === 0 && !opts.zeroPort)) return undefined;
  return { host: m[1].replace(/^\[(.*)\]$/, "$1"), port };
}
