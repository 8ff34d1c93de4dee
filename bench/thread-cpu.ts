import { readFileSync } from 'node:fs';

/**
 * CPU time the main thread (the event loop) has used, in ms, from /proc (Linux; undefined
 * elsewhere). On a machine shared with other work, CPU per message says what the event loop
 * costs even when wall-clock rates swing with the neighbours' load.
 */
export function mainThreadCpuMs(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    // Fields after the command name: state is field 3, utime 14 and stime 15, in clock ticks (1/100 s).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

/**
 * CPU time of the main thread in nanoseconds, from /proc's scheduler statistics (Linux; undefined
 * elsewhere): fine enough to time one search, which `stat`'s 10 ms ticks are not. Unlike
 * `process.cpuUsage()` it leaves out the other threads (an index rebuild, the embedder, the
 * garbage collector's helpers), which are not the caller's wait.
 */
export function mainThreadCpuNs(): number | undefined {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return undefined;
  }
}
