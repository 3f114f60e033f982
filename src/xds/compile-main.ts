// Compile-process entry: compiles the RateLimitConfig resources of one xDS response (each job's source).
// A resource is known by its name and the hash of its bytes: an unchanged one is not decoded again.
import { serveJobs } from "../rules/compile-process.js";
import { resourceEntries, type Resource } from "./resource-entries.js";

serveJobs<Resource[]>((resources) => ({ entries: resourceEntries(resources), warnings: [] }));
