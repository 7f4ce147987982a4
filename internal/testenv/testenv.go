// Package testenv decides, in one place, what a test does when something it needs is not
// on the machine (a built module, Node packages, redis-server): skip it on a developer's
// machine, fail it where every part is required (`make test` and CI set
// STATEGATE_REQUIRE_ALL=1), so a missing artifact can never pass as a skipped test there.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// RequireAllEnv, when "1", turns every missing prerequisite into a failure.
const RequireAllEnv = "STATEGATE_REQUIRE_ALL"

// RequireAll reports whether every prerequisite is required.
func RequireAll() bool { return os.Getenv(RequireAllEnv) == "1" }

// Missing ends t because err says a prerequisite is missing: a skip, or a failure under
// STATEGATE_REQUIRE_ALL=1. A nil err does nothing.
func Missing(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if RequireAll() {
		t.Fatal(err)
	}
	t.Skipf("%v (%s=1 makes this a failure)", err, RequireAllEnv)
}

// NeedFile ends t (as Missing does) when path does not exist; how says how to make it
// ("run `make build`").
func NeedFile(t testing.TB, path, how string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, fmt.Errorf("%s is missing: %s (%w)", path, how, err))
	}
}
