// Written by agentrun for one run of dsh's headless profile. It gives the
// headless runner its task from standard input (in place of the
// headless-startup plugin, which reads it from the command line), writes
// every event of every dsh session to standard output as one JSON line as
// the session commits it, and turns whatever else dsh writes to standard
// output (the runner's final text) into a JSON line too.
import { readSync, writeSync } from "node:fs";

export const name = "agentrun-stream";

function line(obj) {
  const data = Buffer.from(JSON.stringify(obj) + "\n");
  for (let off = 0; off < data.length; ) {
    try {
      off += writeSync(1, data, off);
    } catch (e) {
      if (e.code !== "EAGAIN") throw e;
    }
  }
}

// readStdin reads the task to its end. Standard input is a pipe that may
// be non-blocking: readFileSync(0) fails with EAGAIN when the prompt is
// longer than what the pipe holds (64 KiB) and agentrun is still writing
// it, so read in a loop and wait a little whenever the pipe is empty.
function readStdin() {
  const chunks = [];
  const buf = Buffer.alloc(1 << 16);
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    let n;
    try {
      n = readSync(0, buf, 0, buf.length, null);
    } catch (e) {
      if (e.code === "EAGAIN") {
        Atomics.wait(nap, 0, 0, 5);
        continue;
      }
      if (e.code === "EOF") break;
      throw e;
    }
    if (n === 0) break;
    chunks.push(Buffer.from(buf.subarray(0, n)));
  }
  return Buffer.concat(chunks).toString("utf8");
}

export function apply(ctx) {
  process.stdout.write = (chunk, encoding, cb) => {
    if (typeof encoding === "function") cb = encoding;
    line({ agentrun: "stdout", text: typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8") });
    if (typeof cb === "function") process.nextTick(cb);
    return true;
  };
  ctx.on("session/created", (session) => line({ agentrun: "session", header: session.header }));
  ctx.on("session/event", (session, event) => line({ agentrun: "event", session: session.id, event }));
  ctx.provide("headlessStartup", { task: readStdin() });
}
