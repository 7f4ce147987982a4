package exchange

import (
	"github.com/stategate/stategate/exchange/events"
	"github.com/stategate/stategate/exchange/session"
	"github.com/stategate/stategate/exchange/stats"
)

// Names the files of part 2 of issue 39 (the tool list, tasks, OAuth) still use from
// before their concerns moved to packages of their own: kept until those files move too,
// then this file goes. Hosts use the packages' names.

type Event = events.Event

const (
	EventCallRefused       = events.EventCallRefused
	EventConfigUnknownTool = events.EventConfigUnknownTool
)

func SessionDigest(session string) string { return events.SessionDigest(session) }

type Counter = stats.Counter

const (
	CountToolCalls      = stats.CountToolCalls
	CountDenied         = stats.CountDenied
	CountCASConflicts   = stats.CountCASConflicts
	CountListsDecorated = stats.CountListsDecorated
	CountTasksCreated   = stats.CountTasksCreated
	CountTasksSettled   = stats.CountTasksSettled
	CountSessionsEnded  = stats.CountSessionsEnded
	CountToolsWithheld  = stats.CountToolsWithheld
	CountTransitions    = stats.CountTransitions
)

func IsGatewaySession(id string) bool { return session.IsGateway(id) }

func sessionRecordKey(id string) string { return session.RecordKey(id) }
