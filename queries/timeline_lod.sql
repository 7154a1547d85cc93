-- timeline_lod.sql — what to draw in a 1,920-pixel-wide timeline of the whole run.
--
-- Purpose: deterministic level-of-detail representatives (Intel Trace Analyzer's scheme) for a
--          timeline 1,920 pixels wide: per time slot and thread the dominant region, the
--          messages merged per pair of slots, and the collectives merged per first slot.
-- Inputs:  the default trace's calls, messages and collectives (`commdb TRACE -f
--          queries/timeline_lod.sql --format csv -o timeline.csv`).
-- Output:  four tables —
--   1. resolution: t0, t1, resolution_ns (lod_resolution of the trace's span, first to last
--      event, for 1,920 pixels: the grid the three lod functions share by default), and the
--      span and resolution with their unit;
--   2. lod_calls: slot_start, slot_end, rank, thread, region, time_in_slot_ns, share;
--   3. lod_messages: src, dst, send_slot, recv_slot, messages, bytes_avg, duration_avg,
--      latency_avg, first_send_ts, last_recv_ts;
--   4. lod_collectives: comm, first_slot, op, instances, duration_avg, participants.
--   Tables 2-4 are what a timeline draws, so their times stay in ns throughout (one unit, for
--   programs that read the CSV); their share is of the slot, from 0 to 1.

\echo Timeline resolution for 1,920 pixels
SELECT min(ts) AS t0, max(ts) + 1 AS t1, lod_resolution(min(ts), max(ts) + 1, 1920) AS resolution_ns,
       format_duration(max(ts) + 1 - min(ts)) AS span,
       format_duration(lod_resolution(min(ts), max(ts) + 1, 1920)) AS resolution
FROM events;

\echo Calls per time slot (level of detail)
SELECT * FROM lod_calls(pixels => 1920) ORDER BY rank, thread, slot_start;

\echo Messages per time slot
SELECT * FROM lod_messages(pixels => 1920) ORDER BY send_slot, src, dst, recv_slot;

\echo Collectives per time slot
SELECT * FROM lod_collectives(pixels => 1920) ORDER BY first_slot, comm;
