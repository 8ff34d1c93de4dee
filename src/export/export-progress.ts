/**
 * Count and rate of an export on one rewritten stderr line, at most five times a second, and
 * only when stderr is a terminal: piped or logged, it stays quiet.
 */
export class ExportProgress {
  private readonly enabled: boolean;
  private readonly startedAt: number;
  private lastDrawn = 0;
  private drawn = false;
  private waits = 0;

  constructor(
    private readonly stream: NodeJS.WritableStream,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.enabled = (stream as { isTTY?: boolean }).isTTY === true;
    this.startedAt = now();
  }

  update(count: number): void {
    if (!this.enabled) return;
    const now = this.now();
    if (this.drawn && now - this.lastDrawn < 200) return;
    this.lastDrawn = now;
    this.drawn = true;
    const seconds = (now - this.startedAt) / 1000;
    const rate = seconds > 0 ? Math.round(count / seconds) : 0;
    const waits = this.waits > 0 ? `, waited for Discord ${this.waits}×` : '';
    this.stream.write(`\r\u001b[2K${count} messages exported (${rate}/s${waits})`);
  }

  rateLimited(retryAfterMs: number): void {
    this.waits += 1;
    if (!this.enabled) return;
    this.drawn = true;
    this.stream.write(`\r\u001b[2Krate limited by Discord: waiting ${Math.ceil(retryAfterMs / 1000)} s`);
  }

  finish(): void {
    if (this.enabled && this.drawn) this.stream.write('\r\u001b[2K');
  }
}

