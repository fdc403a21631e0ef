// Talks to `fusion_peer_bench worker` (peer_bench.cc): one command line out, one JSON line back.
import { spawn } from 'node:child_process';
import readline from 'node:readline';

export class WorkerClient {
  constructor(bin, args, env = process.env) {
    this.child = spawn(bin, ['worker', ...args], { stdio: ['pipe', 'pipe', 'inherit'], env });
    this.pending = [];
    readline.createInterface({ input: this.child.stdout }).on('line', (line) => {
      const p = this.pending.shift();
      if (p) p.resolve(JSON.parse(line));
    });
    this.child.on('exit', (code) => {
      for (const p of this.pending.splice(0)) p.reject(new Error(`worker exited (${code})`));
    });
  }

  // Sends `cmd`; resolves to the reply object, rejects on {"ok":false} unless allowError.
  async call(cmd, allowError = false) {
    const reply = await new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      this.child.stdin.write(cmd + '\n');
    });
    if (!reply.ok && !allowError) throw new Error(`worker: ${cmd}: ${reply.error}`);
    return reply;
  }

  close() {
    this.child.stdin.end('quit\n');
  }
}
