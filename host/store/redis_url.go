package store

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Schemes of the distributed Redis deployments (a "rediss" form of each takes TLS).
const (
	schemeCluster  = "redis+cluster://"
	schemeSentinel = "redis+sentinel://"
)

// DefaultWaitTimeout bounds how long a write waits for its replicas' acknowledgement
// (the URL's wait_timeout).
const DefaultWaitTimeout = time.Second

// NewRedisCluster connects to a Redis Cluster through any of its nodes:
//
//	redis+cluster://[user:password@]HOST:PORT[,HOST:PORT...][?OPTIONS]
//	rediss+cluster://...  (TLS)
//
// OPTIONS are go-redis's cluster URL options (read_timeout, dial_timeout, pool_size, ...),
// and wait=N with wait_timeout=D: every compare-and-set and lease must be acknowledged by
// N replicas of its shard within D (default 0: none; see Redis). It pings every master and
// checks that every slot is served.
func NewRedisCluster(ctx context.Context, spec string, opts Options) (*Redis, error) {
	name := redactURL(spec)
	u, hosts, wait, waitFor, err := splitSpec(spec, schemeCluster, 0)
	if err != nil {
		return nil, fmt.Errorf("store[redis] url[%s]: %w", name, err)
	}
	if strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("store[redis] url[%s]: a cluster has no databases: remove the path %q", name, u.Path)
	}
	q := u.Query()
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	u.Host, u.RawQuery = hosts[0], q.Encode()
	co, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("store[redis] url[%s]: %w", name, err)
	}
	co.MaxRetries = -1 // see NewRedis; redirects (MOVED, ASK) are still followed
	return newRedis(ctx, redis.NewClusterClient(co), name, true, wait, waitFor, opts)
}

// NewRedisSentinel connects to the primary that Sentinel names MASTER, through any of the
// sentinels:
//
//	redis+sentinel://[user:password@]HOST:PORT[,HOST:PORT...]/MASTER[?OPTIONS]
//	rediss+sentinel://...  (TLS)
//
// user and password are sent to the sentinels and to the primary. OPTIONS are go-redis's
// failover URL options (db, read_timeout, ...), and wait=N with wait_timeout=D: every
// compare-and-set and lease must be acknowledged by N replicas within D (default wait=1,
// wait_timeout=1s; wait=0 turns it off). Redis replicates asynchronously, so without it a
// write the primary acknowledged can be lost when a replica that lacks it is promoted.
func NewRedisSentinel(ctx context.Context, spec string, opts Options) (*Redis, error) {
	name := redactURL(spec)
	u, hosts, wait, waitFor, err := splitSpec(spec, schemeSentinel, 1)
	if err != nil {
		return nil, fmt.Errorf("store[redis] url[%s]: %w", name, err)
	}
	master := strings.Trim(u.Path, "/")
	if master == "" || strings.Contains(master, "/") {
		return nil, fmt.Errorf("store[redis] url[%s]: want the master's name as the path: %sHOST:PORT/MASTER", name, schemeSentinel)
	}
	q := u.Query()
	q.Set("master_name", master)
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	u.Host, u.Path, u.RawQuery = hosts[0], "", q.Encode()
	fo, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("store[redis] url[%s]: %w", name, err)
	}
	fo.Username, fo.Password = fo.SentinelUsername, fo.SentinelPassword
	fo.MaxRetries = -1 // see NewRedis
	return newRedis(ctx, redis.NewFailoverClient(fo), name, false, wait, waitFor, opts)
}

// splitSpec parses a redis+cluster:// or redis+sentinel:// spec into a redis:// (or
// rediss://) URL with one host, the list of hosts, and the wait options (removed from
// the query).
func splitSpec(spec, scheme string, defaultWait int) (u *url.URL, hosts []string, wait int, waitFor time.Duration, err error) {
	rest, tls := spec, false
	switch {
	case strings.HasPrefix(rest, scheme):
		rest = strings.TrimPrefix(rest, scheme)
	case strings.HasPrefix(rest, "rediss+"+strings.TrimPrefix(scheme, "redis+")):
		rest, tls = strings.TrimPrefix(rest, "rediss+"+strings.TrimPrefix(scheme, "redis+")), true
	default:
		return nil, nil, 0, 0, fmt.Errorf("want %s", scheme)
	}
	base := "redis://"
	if tls {
		base = "rediss://"
	}
	// The host list holds commas, which url.Parse refuses in a host: cut it out first.
	auth, hostsPart := "", rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hostsPart = rest[:i]
	}
	tail := rest[len(hostsPart):]
	if i := strings.LastIndexByte(hostsPart, '@'); i >= 0 {
		auth, hostsPart = hostsPart[:i+1], hostsPart[i+1:]
	}
	for _, h := range strings.Split(hostsPart, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil, nil, 0, 0, fmt.Errorf("names no HOST:PORT")
	}
	u, err = url.Parse(base + auth + hosts[0] + tail)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	q := u.Query()
	wait, waitFor = defaultWait, DefaultWaitTimeout
	if v := q.Get("wait"); v != "" {
		if wait, err = strconv.Atoi(v); err != nil || wait < 0 {
			return nil, nil, 0, 0, fmt.Errorf("wait[%s] is not a number of replicas", v)
		}
	}
	if v := q.Get("wait_timeout"); v != "" {
		if waitFor, err = time.ParseDuration(v); err != nil || waitFor <= 0 {
			return nil, nil, 0, 0, fmt.Errorf("wait_timeout[%s] is not a positive duration (such as 500ms)", v)
		}
	}
	q.Del("wait")
	q.Del("wait_timeout")
	u.RawQuery = q.Encode()
	return u, hosts, wait, waitFor, nil
}
