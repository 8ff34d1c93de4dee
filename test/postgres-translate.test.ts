/** SQLite statements as PostgreSQL receives them (no server needed). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { replaceClause, translateStatement } from '../src/storage/postgres/translate-sql.js';

test('positional and named parameters become $n, outside strings, identifiers and comments', () => {
  const positional = translateStatement("SELECT * FROM t WHERE a = ? AND b = '?' AND \"c?\" = ? -- why?\n AND d = ?");
  assert.equal(positional.text, "SELECT * FROM t WHERE a = $1 AND b = '?' AND \"c?\" = $2 -- why?\n AND d = $3");
  assert.deepEqual(positional.params, { kind: 'positional', count: 3 });

  const named = translateStatement('INSERT INTO t (a, b, c) VALUES (@a, :b, $c) ON CONFLICT (a) DO UPDATE SET b = @b');
  assert.equal(named.text, 'INSERT INTO t (a, b, c) VALUES ($1, $2, $3) ON CONFLICT (a) DO UPDATE SET b = $2');
  assert.deepEqual(named.params, { kind: 'named', names: ['a', 'b', 'c'] });

  const native = translateStatement("SELECT $1::json, 'it''s @home' /* @x ? */ FROM t");
  assert.equal(native.text, "SELECT $1::json, 'it''s @home' /* @x ? */ FROM t");
  assert.deepEqual(native.params, { kind: 'none' });

  assert.throws(() => translateStatement('SELECT ? , @name'), /mixes positional/);
});

test('INSERT OR IGNORE and INSERT OR REPLACE become ON CONFLICT clauses, before RETURNING', () => {
  assert.equal(translateStatement('INSERT OR IGNORE INTO t (a) VALUES (?)').text, 'INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING');
  assert.equal(
    translateStatement('INSERT OR IGNORE INTO t (a) VALUES (?) RETURNING id').text,
    'INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id',
  );
  const replace = translateStatement('INSERT OR REPLACE INTO pairs (channel_id, seq, body) VALUES (?, ?, ?);');
  assert.deepEqual(replace.replace, { table: 'pairs', columns: ['channel_id', 'seq', 'body'] });
  assert.equal(
    replaceClause(replace, ['channel_id', 'seq']),
    'INSERT INTO pairs (channel_id, seq, body) VALUES ($1, $2, $3) ON CONFLICT (channel_id, seq) DO UPDATE SET body = EXCLUDED.body',
  );
  assert.equal(replaceClause(translateStatement('INSERT OR REPLACE INTO k (id) VALUES (?)'), ['id']), 'INSERT INTO k (id) VALUES ($1) ON CONFLICT (id) DO NOTHING');
  assert.throws(() => translateStatement('INSERT OR REPLACE INTO k VALUES (?)'), /explicit column list/);
});

test('SQLite functions and alias case carry over; keywords after AS stay keywords', () => {
  assert.equal(translateStatement('SELECT instr(content, ?) AS at FROM t').text, 'SELECT strpos(content, $1) AS at FROM t');
  assert.equal(translateStatement('SELECT max(seq) AS maxSeq, count(*) AS total FROM t').text, 'SELECT max(seq) AS "maxSeq", count(*) AS total FROM t');
  assert.equal(
    translateStatement('WITH hits AS MATERIALIZED (SELECT 1 AS one) SELECT one FROM hits').text,
    'WITH hits AS MATERIALIZED (SELECT 1 AS one) SELECT one FROM hits',
  );
  assert.equal(translateStatement('INSERT INTO memory_items (a) VALUES (?)').insertInto, 'memory_items');
});

test('every ? outside a literal becomes exactly one numbered parameter, in order', () => {
  const fragment = fc.oneof(
    fc.constant('?'),
    fc.constantFrom(' a = ', ', ', ' AND ', '(', ')', ' x '),
    fc.string({ maxLength: 6 }).map((text) => `'${text.replace(/'/g, "''")}'`),
  );
  fc.assert(
    fc.property(fc.array(fragment, { maxLength: 30 }), (parts) => {
      const sql = `SELECT ${parts.join('')}`;
      const expected = parts.filter((part) => part === '?').length;
      const translated = translateStatement(sql);
      const numbers = [...translated.text.replace(/'(?:[^']|'')*'/g, '').matchAll(/\$(\d+)/g)].map((match) => Number(match[1]));
      assert.deepEqual(numbers, Array.from({ length: expected }, (_, index) => index + 1));
      assert.deepEqual(translated.params, expected === 0 ? { kind: 'none' } : { kind: 'positional', count: expected });
    }),
    { numRuns: 500 },
  );
});
