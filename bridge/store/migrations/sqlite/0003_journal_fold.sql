-- How far the value journal is folded into switch_states, written in the
-- same transaction as the values: a daemon killed between that commit and
-- emptying the journal must not, at its next start, replay the journaled
-- values over the newer ones the same commit stored. generation is the
-- random number in the journal's first line; size is a byte offset.
CREATE TABLE journal_fold (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL,
    size       INTEGER NOT NULL
);
