// Compile-process entry: compiles the rule directory (each job's source is its path).
import { dirEntries } from "./compile-job.js";
import { serveJobs } from "./compile-process.js";

serveJobs<string>(dirEntries);
