/**
 * The tuning report draws one marker per compaction that landed and per truncation, whatever the
 * log could work out about it: a landing logged without its usage (no usage sample of the
 * channel before it) is drawn on the usage line where it happened, as a failure is.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ChannelLog } from '../src/compaction-log/read-log.js';
import { channelReport } from '../src/report/report-data.js';

test('every landing and truncation gets its marker, one logged without a usage on the line', () => {
  const log: ChannelLog = {
    channelId: 'c1',
    samples: [
      { id: 1, position: 10, usage: 0.5, at: 1 },
      { id: 3, position: 20, usage: 0.82, at: 3 },
      { id: 6, position: 30, usage: 0.6, at: 6 },
    ],
    events: [
      { id: 2, kind: 'compaction_completed', tier: 'background', position: 15, usage: null, at: 2, data: { tokens_freed: 100, messages_compacted: 4 } },
      { id: 4, kind: 'compaction_completed', tier: 'background', position: 20, usage: 0.55, at: 4, data: { tokens_freed: 300, messages_compacted: 6 } },
      { id: 5, kind: 'emergency_truncation', tier: 'emergency', position: 25, usage: 0.5, at: 5, data: { tokens_freed: 900, messages_dropped: 12 } },
      { id: 7, kind: 'compaction_failed', tier: 'aggressive', position: 30, usage: null, at: 7, data: {} },
    ],
    settings: [],
  };
  const report = channelReport(log);
  assert.deepEqual(
    report.markers.map((marker) => [marker.outcome, marker.position, marker.tokensFreed]),
    [
      ['completed', 15, 100],
      ['completed', 20, 300],
      ['emergency', 25, 900],
      ['failed', 30, 0],
    ],
  );
  const unknown = report.markers[0]!;
  assert.equal(unknown.usage, 0.5, 'drawn on the usage line where it happened (the last sample before it)');
  assert.equal(report.tally.tokensFreed >= 400, true);
});
