// gRPC server TLS and mTLS from PEM files, reloaded when they change on disk (certificate rotation
// without a restart). A changed set that does not load (half-written file, key not matching the
// certificate) is logged and ignored: the previous certificates keep serving.
import { UsageError } from "../../core/usage-error.js";
import fs from "node:fs";
import tls from "node:tls";
import type { Logger } from "pino";

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  /** CA bundle for client certificates: given = every client must present one it signed (mTLS). */
  caFile?: string;
  /** How often the files are checked for changes. */
  reloadMs: number;
}

/** The files cannot be used as given; the message names the file, never its contents. */
/** A TLS setting that cannot work: a settings error like any other (exit 2). */
export class TlsConfigError extends UsageError {}

interface Loaded {
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
}

/** What node:tls needs (e.g. http2.createSecureServer, server.setSecureContext) for the current files. */
interface SecureContextFiles {
  cert: Buffer;
  key: Buffer;
  /** mTLS: the CA bundle client certificates must chain to. */
  ca?: Buffer;
  /** mTLS: ask every client for a certificate... */
  requestCert: boolean;
  /** ...and refuse the handshake without a valid one. */
  rejectUnauthorized: boolean;
}

export interface ServerTls {
  mode: "tls" | "mtls";
  /** For node:tls (h2/): the certificates in force now. */
  secureContextOptions(): SecureContextFiles;
  /** `listener` hears each reload that loaded (then secureContextOptions() gives the new files); returns an unsubscribe. */
  onChange(listener: () => void): () => void;
  /** Stops watching the files. */
  close(): void;
}

export function serverTls(files: TlsFiles, logger: Logger): ServerTls {
  const provider = new ReloadingCertificates(files, logger);
  const mtls = files.caFile !== undefined;
  return {
    mode: mtls ? "mtls" : "tls",
    secureContextOptions() {
      const { cert, key, ca } = provider.loaded();
      return { cert, key, ca, requestCert: mtls, rejectUnauthorized: true };
    },
    onChange: (listener) => provider.onChange(listener),
    close: () => provider.close(),
  };
}

class ReloadingCertificates {
  private current: Loaded;
  private stamp: string;
  private readonly changeListeners = new Set<() => void>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly files: TlsFiles,
    private readonly logger: Logger,
  ) {
    this.stamp = fileStamp(files);
    this.current = loadFiles(files);
    this.timer = setInterval(() => this.check(), files.reloadMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  loaded(): Loaded {
    return this.current;
  }

  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  private check(): void {
    const stamp = fileStamp(this.files);
    if (stamp === this.stamp) return;
    this.stamp = stamp; // a failed load is logged once per change, not once per tick
    let next: Loaded;
    try {
      next = loadFiles(this.files);
    } catch (err) {
      this.logger.warn({ reason: (err as Error).message }, "TLS certificate reload failed; keeping the previous certificates");
      return;
    }
    this.current = next;
    for (const l of this.changeListeners) {
      try {
        l();
      } catch (err) {
        this.logger.error({ err }, "applying reloaded TLS certificates failed; the previous ones keep serving");
      }
    }
    this.logger.info({ cert: this.files.certFile }, "TLS certificates reloaded");
  }
}

function loadFiles(files: TlsFiles): Loaded {
  const cert = readPem(files.certFile, "TLS certificate");
  const key = readPem(files.keyFile, "TLS key");
  const ca = files.caFile ? readPem(files.caFile, "TLS client CA") : undefined;
  try {
    // Parses every PEM and checks that the key belongs to the certificate.
    tls.createSecureContext({ cert, key, ca });
  } catch (err) {
    throw new TlsConfigError(
      `TLS files ${files.certFile} / ${files.keyFile}${files.caFile ? ` / ${files.caFile}` : ""} do not load: ${(err as Error).message}`,
    );
  }
  return { cert, key, ca };
}

function readPem(file: string, what: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new TlsConfigError(`cannot read ${what} ${file}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
}

/** Changes when any file is replaced or rewritten; missing files count as a state too. */
function fileStamp(files: TlsFiles): string {
  return [files.certFile, files.keyFile, files.caFile ?? ""]
    .map((f) => {
      if (!f) return "";
      try {
        const s = fs.statSync(f);
        return `${s.ino}:${s.size}:${s.mtimeMs}`;
      } catch {
        return "missing";
      }
    })
    .join("|");
}
