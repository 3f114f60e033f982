// Test certificates made with the openssl CLI at test time: CAs, a server certificate for
// 127.0.0.1/localhost, client certificates. EC P-256 keys: fast to make.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export interface Pem {
  key: string;
  cert: string;
}

export interface CertFactory {
  dir: string;
  ca(name: string): Pem;
  /** A certificate signed by `ca`; server certificates name 127.0.0.1 and localhost. */
  issue(ca: Pem, name: string, kind: "server" | "client"): Pem;
}

export function certFactory(): CertFactory {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-certs-"));
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  const newKey = (file: string) => openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", file);
  return {
    dir,
    ca(name) {
      const pem = { key: path.join(dir, `${name}.key`), cert: path.join(dir, `${name}.pem`) };
      newKey(pem.key);
      openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        pem.key,
        "-out",
        pem.cert,
        "-days",
        "2",
        "-subj",
        `/CN=${name}`,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
      );
      return pem;
    },
    issue(ca, name, kind) {
      const pem = { key: path.join(dir, `${name}.key`), cert: path.join(dir, `${name}.pem`) };
      const csr = path.join(dir, `${name}.csr`);
      const ext = path.join(dir, `${name}.ext`);
      newKey(pem.key);
      openssl("req", "-new", "-key", pem.key, "-out", csr, "-subj", `/CN=${name}`);
      fs.writeFileSync(ext, kind === "server" ? "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n" : "extendedKeyUsage=clientAuth\n");
      openssl("x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial", "-out", pem.cert, "-days", "2", "-extfile", ext);
      return pem;
    },
  };
}

export const read = (file: string) => fs.readFileSync(file);
