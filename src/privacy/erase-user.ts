import type { SqlClient } from '../storage/sql-client.js';

/**
 * Every message a user wrote, by channel: from history and from the transcript index (which
 * may hold messages whose history row is gone). Tool traffic and the bot's words are not theirs.
 */
export async function findUserMessages(db: SqlClient, userId: string): Promise<Map<string, string[]>> {
  const rows = (await db
    .prepare(
      `SELECT channel_id, message_id FROM history_entries WHERE author_id = ? AND kind = 'message' AND role = 'user'
       UNION
       SELECT channel_id, message_id FROM memory_items WHERE author_id = ? AND kind = 'transcript' AND message_id IS NOT NULL`,
    )
    .all(userId, userId)) as Array<{ channel_id: string; message_id: string }>;
  const byChannel = new Map<string, string[]>();
  for (const row of rows) {
    const list = byChannel.get(row.channel_id) ?? [];
    list.push(row.message_id);
    byChannel.set(row.channel_id, list);
  }
  return byChannel;
}
