import { Worker } from 'node:worker_threads';

/** What a worker answers each request with: its id, and a result or why not. */
export type WorkerReply<Result> = { id: number; result: Result } | { id: number; error: string };

interface Pending<Result> {
  resolve: (result: Result) => void;
  reject: (error: Error) => void;
}

/**
 * The main-thread side of a worker thread that answers requests one message each: started on
 * first use, it keeps the process alive only while a request is in flight. A thread that dies
 * fails the requests it held (their callers decide what to do) and the next request starts a
 * new one. The worker posts `WorkerReply` messages echoing each request's `id`.
 */
export class WorkerClient<Request extends object, Result> {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending<Result>>();
  private nextId = 1;

  constructor(
    private readonly script: URL,
    /** Names the thread in errors ("embedding thread: ..."). */
    private readonly name: string,
  ) {}

  request(request: Request, transfer: readonly ArrayBuffer[] = []): Promise<Result> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.pending.size === 1) worker.ref();
      worker.postMessage({ ...request, id }, [...transfer]);
    });
  }

  private start(): Worker {
    const worker = new Worker(this.script);
    worker.unref();
    worker.on('message', (reply: WorkerReply<Result>) => {
      const pending = this.pending.get(reply.id);
      if (!pending) return;
      this.settle(reply.id);
      if ('error' in reply) pending.reject(new Error(`${this.name}: ${reply.error}`));
      else pending.resolve(reply.result);
    });
    const fail = (error: Error): void => {
      if (this.worker === worker) this.worker = undefined;
      for (const [id, pending] of [...this.pending]) {
        this.settle(id);
        pending.reject(error);
      }
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`${this.name} exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }

  private settle(id: number): void {
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker?.unref();
  }
}
