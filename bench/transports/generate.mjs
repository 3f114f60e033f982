// Code generation for the bake-off's candidate transports, from protos/ into generated/:
//   rls-static.cjs  protobufjs static code (pbjs -t static-module, protobufjs-cli) for grpc-js-static
//   es/...          @bufbuild/protobuf descriptors (buf generate + protoc-gen-es) for connect
// Run by the bake-off (npm run bench -- --transports ...) and bench/transports/conformance.mjs; by hand:
//   node bench/transports/generate.mjs [--force]
// Regenerates when an output is missing or older than a file of protos/ or this script.
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const PROTOS = path.join(ROOT, "protos");
const BIN = path.join(ROOT, "node_modules/.bin");
export const GENERATED = path.join(HERE, "generated");
export const STATIC_MODULE = path.join(GENERATED, "rls-static.cjs");
export const ES_DIR = path.join(GENERATED, "es");
const ES_MARKER = path.join(ES_DIR, "envoy/service/ratelimit/v3/rls_pb.js");
const ENTRY_PROTOS = ["envoy/service/ratelimit/v3/rls.proto", "grpc/health/v1/health.proto"];

function run(cmd, args, cwd = ROOT) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${path.basename(cmd)} ${args.join(" ")} failed: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

function newestInput() {
  let newest = fs.statSync(fileURLToPath(import.meta.url)).mtimeMs;
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".proto")) newest = Math.max(newest, fs.statSync(p).mtimeMs);
    }
  };
  walk(PROTOS);
  return newest;
}

const stale = (file, since) => !fs.existsSync(file) || fs.statSync(file).mtimeMs < since;

function requireTool(name, pkg) {
  const p = path.join(BIN, name);
  if (!fs.existsSync(p)) throw new Error(`${name} is missing: npm install (devDependency ${pkg})`);
  return p;
}

/** protobufjs static code: decode/encode without reflection; keepCase to match proto-loader's objects. */
async function generateStatic() {
  const tmp = STATIC_MODULE + ".tmp";
  // --force-number: int64/uint64 setters and toObject use numbers (proto-loader runs with longs: Number);
  // no verify/convert/delimited: the transport only encodes and decodes.
  await run(requireTool("pbjs", "protobufjs-cli"), [
    "-t",
    "static-module",
    "-w",
    "commonjs",
    "--keep-case",
    "--force-number",
    "--no-verify",
    "--no-convert",
    "--no-delimited",
    "--no-beautify",
    "-p",
    PROTOS,
    "-o",
    tmp,
    ...ENTRY_PROTOS,
  ]);
  fs.renameSync(tmp, STATIC_MODULE);
}

/** @bufbuild/protobuf descriptors through buf (its npm package ships the binary) and protoc-gen-es. */
async function generateEs() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sluice-buf-gen-"));
  const out = path.join(dir, "es");
  const template = path.join(dir, "buf.gen.yaml");
  fs.writeFileSync(
    template,
    [
      "version: v2",
      "plugins:",
      `  - local: ${requireTool("protoc-gen-es", "@bufbuild/protoc-gen-es")}`,
      `    out: ${out}`,
      "    opt: [target=js, import_extension=js]",
      "",
    ].join("\n"),
  );
  try {
    await run(requireTool("buf", "@bufbuild/buf"), ["generate", PROTOS, "--template", template]);
    fs.rmSync(ES_DIR, { recursive: true, force: true });
    fs.cpSync(out, ES_DIR, { recursive: true });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Generates what is missing or stale; returns the names of the parts it wrote. */
export async function ensureGenerated({ force = false } = {}) {
  fs.mkdirSync(GENERATED, { recursive: true });
  const since = newestInput();
  const wrote = [];
  if (force || stale(STATIC_MODULE, since)) {
    await generateStatic();
    wrote.push("rls-static.cjs (pbjs)");
  }
  if (force || stale(ES_MARKER, since)) {
    await generateEs();
    wrote.push("es/ (buf + protoc-gen-es)");
  }
  return wrote;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const wrote = await ensureGenerated({ force: process.argv.includes("--force") });
  console.log(wrote.length ? `generated: ${wrote.join(", ")}` : "generated code is up to date");
}
