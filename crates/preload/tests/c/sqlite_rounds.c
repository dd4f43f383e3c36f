/* A driver of SQLite (the amalgamation sqlite3.c that the libsqlite3-sys crate bundles, built
 * with -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION): ROUNDS times, an in-memory
 * database with a table and an index, ROWS rows inserted in one transaction through a
 * prepared statement, an indexed range query and a grouped aggregate, both checked against
 * the sums they must give; prints the total. The library is a real program no one here wrote,
 * for `perfaux record` against `uftrace record` (crates/preload/BENCHMARKS.md).
 * Usage: sqlite_rounds [ROUNDS] [ROWS] */
#include <stdio.h>
#include <stdlib.h>
#include "sqlite3.h"

static void must(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    int rows = argc > 2 ? atoi(argv[2]) : 2000;
    long long total = 0;
    for (int r = 0; r < rounds; r++) {
        sqlite3 *db;
        sqlite3_stmt *st;
        must(sqlite3_open(":memory:", &db), db, "open");
        must(sqlite3_exec(db,
                          "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);"
                          "CREATE INDEX t_k ON t(k);"
                          "BEGIN;",
                          0, 0, 0),
             db, "create");
        must(sqlite3_prepare_v2(db, "INSERT INTO t(id, k, v) VALUES(?1, ?2, ?3)", -1, &st, 0),
             db, "prepare insert");
        for (int i = 0; i < rows; i++) {
            char v[32];
            int n = snprintf(v, sizeof v, "row %d of round %d", i, r);
            sqlite3_bind_int(st, 1, i);
            sqlite3_bind_int(st, 2, (i * 7919 + r) % 1000);
            sqlite3_bind_text(st, 3, v, n, SQLITE_TRANSIENT);
            must(sqlite3_step(st), db, "insert");
            sqlite3_reset(st);
        }
        sqlite3_finalize(st);
        must(sqlite3_exec(db, "COMMIT;", 0, 0, 0), db, "commit");

        /* The indexed query: the rows whose k is in [100, 199]. */
        long long want_n = 0, want_sum = 0;
        for (int i = 0; i < rows; i++) {
            int k = (i * 7919 + r) % 1000;
            if (k >= 100 && k <= 199) want_n++, want_sum += i;
        }
        must(sqlite3_prepare_v2(db, "SELECT count(*), total(id) FROM t WHERE k BETWEEN 100 AND 199",
                                -1, &st, 0),
             db, "prepare query");
        must(sqlite3_step(st), db, "query");
        if (sqlite3_column_int64(st, 0) != want_n || (long long)sqlite3_column_double(st, 1) != want_sum) {
            fprintf(stderr, "query: wrong result in round %d\n", r);
            return 2;
        }
        sqlite3_finalize(st);

        /* The aggregate: per k % 10, the count and the sum of the lengths of v. */
        long long groups = 0, count = 0;
        must(sqlite3_prepare_v2(db, "SELECT k % 10, count(*), sum(length(v)) FROM t GROUP BY 1 ORDER BY 1",
                                -1, &st, 0),
             db, "prepare aggregate");
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            groups++;
            count += sqlite3_column_int64(st, 1);
            total += sqlite3_column_int64(st, 2);
        }
        must(rc, db, "aggregate");
        sqlite3_finalize(st);
        if (count != rows || groups != (rows < 10 ? rows : 10)) {
            fprintf(stderr, "aggregate: wrong result in round %d\n", r);
            return 3;
        }
        total += want_n;
        sqlite3_close(db);
    }
    printf("total %lld\n", total);
    return 0;
}
