package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sprint is one sprint of the task board.
type Sprint struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Task is one task of the task board.
type Task struct {
	ID     string `json:"id"`
	Sprint string `json:"sprint"`
	Title  string `json:"title"`
	Status string `json:"status" jsonschema:"one of todo, in_progress, done"`
}

// Country is one entry of countries.list.
type Country struct {
	Code string `json:"code" jsonschema:"ISO 3166-1 alpha-2 code"`
	Name string `json:"name"`
}

// User is one entry of the user directory.
type User struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
	Role  string `json:"role"`
}

// CartItem is one line of a cart.
type CartItem struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Qty        int    `json:"qty"`
	UnitCents  int    `json:"unit_cents"`
	TotalCents int    `json:"total_cents"`
}

// CartView is what the cart tools report about a cart.
type CartView struct {
	CartID     string     `json:"cart_id,omitempty" jsonschema:"the cart's handle; absent for the session's default cart"`
	Status     string     `json:"status" jsonschema:"open, checked_out or paid"`
	Items      []CartItem `json:"items"`
	ItemCount  int        `json:"item_count"`
	TotalCents int        `json:"total_cents"`
}

// Order is the receipt of cart.pay.
type Order struct {
	OrderID    string     `json:"order_id"`
	CartID     string     `json:"cart_id,omitempty"`
	PaidCents  int        `json:"paid_cents"`
	Items      []CartItem `json:"items"`
	CartStatus string     `json:"cart_status"`
}

var taskStatuses = []string{"todo", "in_progress", "done"}

type product struct {
	name  string
	cents int
}

var catalog = map[string]product{
	"apple":  {"Apple", 120},
	"banana": {"Banana", 80},
	"coffee": {"Coffee beans, 250 g", 950},
	"tea":    {"Green tea, 100 g", 650},
	"mug":    {"Mug", 1200},
}

func catalogSKUs() []string {
	skus := make([]string, 0, len(catalog))
	for k := range catalog {
		skus = append(skus, k)
	}
	slices.Sort(skus)
	return skus
}

var countries = []Country{
	{"AR", "Argentina"}, {"AU", "Australia"}, {"BR", "Brazil"}, {"CA", "Canada"},
	{"DE", "Germany"}, {"ES", "Spain"}, {"FR", "France"}, {"GB", "United Kingdom"},
	{"IN", "India"}, {"IT", "Italy"}, {"JP", "Japan"}, {"KE", "Kenya"},
	{"MX", "Mexico"}, {"NL", "Netherlands"}, {"NZ", "New Zealand"}, {"US", "United States"},
}

var users = []User{
	{"u1", "Ada Lovelace", "ada@example.com", "admin"},
	{"u2", "Grace Hopper", "grace@example.com", "member"},
	{"u3", "Alan Turing", "alan@example.com", "member"},
}

type cart struct {
	id     string
	status string
	items  []CartItem
}

func (c *cart) total() int {
	t := 0
	for _, it := range c.items {
		t += it.TotalCents
	}
	return t
}

func (c *cart) view() CartView {
	v := CartView{CartID: c.id, Status: c.status, Items: slices.Clone(c.items), TotalCents: c.total()}
	if v.Items == nil {
		v.Items = []CartItem{}
	}
	for _, it := range c.items {
		v.ItemCount += it.Qty
	}
	return v
}

// store is the in-memory state of one demo server.
type store struct {
	slowDelay time.Duration

	mu           sync.Mutex
	sprints      []Sprint
	tasks        []Task
	carts        map[string]*cart // by cart_id (carts made by cart.create)
	sessionCarts map[string]*cart // the default cart of each session ("" when sessionless)
	nextSprint   int
	nextOrder    int

	// slowStart and slowDone, when set (by tests), are told when each slow.wait starts and
	// how it ended: nil when it slept the full delay, the context's error otherwise.
	slowStart func()
	slowDone  func(error)
}

func newStore(opts Options) *store {
	d := opts.SlowDelay
	if d <= 0 {
		d = DefaultSlowDelay
	}
	return &store{
		slowDelay: d,
		sprints: []Sprint{
			{"S1", "Sprint 1: onboarding"},
			{"S2", "Sprint 2: checkout"},
		},
		tasks: []Task{
			{"T1", "S1", "Write the welcome email", "done"},
			{"T2", "S1", "Design the signup form", "in_progress"},
			{"T3", "S2", "Add a payment provider", "todo"},
			{"T4", "S2", "Show the order summary", "todo"},
		},
		carts:        map[string]*cart{},
		sessionCarts: map[string]*cart{},
		nextSprint:   3,
		nextOrder:    1,
	}
}

func boolp(b bool) *bool { return &b }

// hints returns truthful annotations for a tool of this closed, in-memory world.
func hints(title string, readOnly, destructive, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{
		Title:           title,
		ReadOnlyHint:    readOnly,
		DestructiveHint: boolp(destructive),
		IdempotentHint:  idempotent,
		OpenWorldHint:   boolp(false),
	}
}

// Tool inputs.

type noArgs struct{}

type sprintsCreateIn struct {
	Name string `json:"name" jsonschema:"the new sprint's name"`
}

type tasksListIn struct {
	Sprint string `json:"sprint,omitempty" jsonschema:"only the tasks of this sprint id (e.g. S1)"`
}

type tasksUpdateIn struct {
	ID     string `json:"id" jsonschema:"the task id (e.g. T3)"`
	Status string `json:"status,omitempty" jsonschema:"new status: todo, in_progress or done"`
	Title  string `json:"title,omitempty" jsonschema:"new title"`
}

type cartIn struct {
	CartID string `json:"cart_id,omitempty" jsonschema:"a cart handle from cart.create; without it the session's default cart is used"`
}

type cartAddIn struct {
	CartID string `json:"cart_id,omitempty" jsonschema:"a cart handle from cart.create; without it the session's default cart is used"`
	SKU    string `json:"sku" jsonschema:"product SKU: apple, banana, coffee, mug or tea"`
	Qty    int    `json:"qty,omitempty" jsonschema:"quantity (default 1)"`
}

type cartPayIn struct {
	CartID string   `json:"cart_id,omitempty" jsonschema:"a cart handle from cart.create; without it the session's default cart is used"`
	Amount *float64 `json:"amount,omitempty" jsonschema:"amount to pay in currency units; when given it must equal the cart total"`
}

type bulkImportIn struct {
	Rows []any `json:"rows" jsonschema:"the rows to import (any JSON values)"`
}

type reportsBigIn struct {
	KB int `json:"kb" jsonschema:"approximate size of the report in KiB (1 to 4096)"`
}

type usersGetIn struct {
	ID string `json:"id" jsonschema:"the user id (e.g. u1)"`
}

// Tool outputs.

type sprintsOut struct {
	Sprints []Sprint `json:"sprints"`
}

type tasksOut struct {
	Tasks []Task `json:"tasks"`
}

type countriesOut struct {
	Countries []Country `json:"countries"`
}

type cartCreateOut struct {
	CartID string `json:"cart_id" jsonschema:"the new cart's handle: pass it as cart_id to the other cart tools"`
}

type bulkImportOut struct {
	Imported int `json:"imported"`
}

type slowOut struct {
	SleptMs int64 `json:"slept_ms"`
}

type reportOut struct {
	KB    int `json:"kb"`
	Bytes int `json:"bytes"`
	Lines int `json:"lines"`
}

func (s *store) register(srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "sprints.list",
		Description: "List the sprints of the task board.",
		Annotations: hints("List sprints", true, false, true),
	}, s.sprintsList)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "sprints.create",
		Description: "Create a sprint and return it.",
		Annotations: hints("Create a sprint", false, false, false),
	}, s.sprintsCreate)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "tasks.list",
		Description: "List the tasks of the task board, optionally only those of one sprint.",
		Annotations: hints("List tasks", true, false, true),
	}, s.tasksList)

	updateSchema, err := jsonschema.For[tasksUpdateIn](nil)
	if err != nil {
		panic(err)
	}
	if p := updateSchema.Properties["status"]; p != nil {
		for _, v := range taskStatuses {
			p.Enum = append(p.Enum, v)
		}
	}
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "tasks.update",
		Description: "Change a task's status and/or title. Fails when the task id is unknown.",
		InputSchema: updateSchema,
		Annotations: hints("Update a task", false, true, true),
	}, s.tasksUpdate)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "countries.list",
		Description: "List the supported countries (a static list).",
		Annotations: hints("List countries", true, false, true),
	}, s.countriesList)

	mcp.AddTool(srv, &mcp.Tool{
		Name:        "cart.create",
		Description: "Create a new empty cart and return its cart_id, a handle to pass to the other cart tools.",
		Annotations: hints("Create a cart", false, false, false),
	}, s.cartCreate)
	mcp.AddTool(srv, &mcp.Tool{
		Name: "cart.add_item",
		Description: "Add a product to the cart (the session's default cart, or cart_id). " +
			"SKUs: " + strings.Join(catalogSKUs(), ", ") + ".",
		Annotations: hints("Add an item to the cart", false, false, false),
	}, s.cartAddItem)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "cart.checkout",
		Description: "Check the cart out: lock its contents and return the total to pay. Fails on an empty cart.",
		Annotations: hints("Check out", false, false, true),
	}, s.cartCheckout)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "cart.pay",
		Description: "Pay for the cart and return the order; the cart is emptied. Fails on an empty cart.",
		Annotations: hints("Pay", false, true, false),
	}, s.cartPay)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "cart.view",
		Description: "Show the cart's items, status and total.",
		Annotations: hints("View the cart", true, false, true),
	}, s.cartView)

	mcp.AddTool(srv, &mcp.Tool{
		Name:        "bulk.import",
		Description: "Import rows in bulk; returns how many were imported.",
		Annotations: hints("Bulk import", false, false, false),
	}, s.bulkImport)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "slow.wait",
		Description: "Wait a while (the server's configured delay, 2s by default) and return.",
		Annotations: hints("Wait", true, false, true),
	}, s.slowWait)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "reports.big",
		Description: "Generate a plain-text report of about kb KiB.",
		Annotations: hints("Big report", true, false, true),
	}, s.reportsBig)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "users.get",
		Description: "Get a user of the directory by id (u1, u2, u3).",
		Annotations: hints("Get a user", true, false, true),
	}, s.usersGet)
}

func (s *store) sprintsList(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, sprintsOut, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return nil, sprintsOut{Sprints: slices.Clone(s.sprints)}, nil
}

func (s *store) sprintsCreate(_ context.Context, _ *mcp.CallToolRequest, in sprintsCreateIn) (*mcp.CallToolResult, Sprint, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return nil, Sprint{}, errors.New("name must not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := Sprint{ID: "S" + strconv.Itoa(s.nextSprint), Name: name}
	s.nextSprint++
	s.sprints = append(s.sprints, sp)
	return nil, sp, nil
}

func (s *store) tasksList(_ context.Context, _ *mcp.CallToolRequest, in tasksListIn) (*mcp.CallToolResult, tasksOut, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := tasksOut{Tasks: []Task{}}
	for _, t := range s.tasks {
		if in.Sprint == "" || t.Sprint == in.Sprint {
			out.Tasks = append(out.Tasks, t)
		}
	}
	return nil, out, nil
}

func (s *store) tasksUpdate(_ context.Context, _ *mcp.CallToolRequest, in tasksUpdateIn) (*mcp.CallToolResult, Task, error) {
	if in.Status == "" && in.Title == "" {
		return nil, Task{}, errors.New("nothing to update: give status, title or both")
	}
	if in.Status != "" && !slices.Contains(taskStatuses, in.Status) {
		return nil, Task{}, fmt.Errorf("unknown status %q: use one of %s", in.Status, strings.Join(taskStatuses, ", "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.tasks {
		t := &s.tasks[i]
		if t.ID != in.ID {
			continue
		}
		if in.Status != "" {
			t.Status = in.Status
		}
		if in.Title != "" {
			t.Title = in.Title
		}
		return nil, *t, nil
	}
	ids := make([]string, len(s.tasks))
	for i, t := range s.tasks {
		ids[i] = t.ID
	}
	return nil, Task{}, fmt.Errorf("unknown task id %q (known: %s)", in.ID, strings.Join(ids, ", "))
}

func (s *store) countriesList(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, countriesOut, error) {
	return nil, countriesOut{Countries: slices.Clone(countries)}, nil
}

// cartFor returns the cart a call acts on: cart_id when given, else the default cart of the
// calling session. The caller holds s.mu.
func (s *store) cartFor(req *mcp.CallToolRequest, cartID string) (*cart, error) {
	if cartID != "" {
		c, ok := s.carts[cartID]
		if !ok {
			return nil, fmt.Errorf("unknown cart_id %q: create a cart with cart.create", cartID)
		}
		return c, nil
	}
	key := ""
	if req != nil && req.Session != nil {
		key = req.Session.ID()
	}
	c, ok := s.sessionCarts[key]
	if !ok {
		c = &cart{status: "open"}
		s.sessionCarts[key] = c
	}
	return c, nil
}

func newCartID() string {
	var b [8]byte
	rand.Read(b[:])
	return "cart_" + hex.EncodeToString(b[:])
}

func (s *store) cartCreate(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, cartCreateOut, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := newCartID()
	s.carts[id] = &cart{id: id, status: "open"}
	return nil, cartCreateOut{CartID: id}, nil
}

func (s *store) cartAddItem(_ context.Context, req *mcp.CallToolRequest, in cartAddIn) (*mcp.CallToolResult, CartView, error) {
	p, ok := catalog[in.SKU]
	if !ok {
		return nil, CartView{}, fmt.Errorf("unknown sku %q (known: %s)", in.SKU, strings.Join(catalogSKUs(), ", "))
	}
	qty := in.Qty
	if qty == 0 {
		qty = 1
	}
	if qty < 0 || qty > 1000 {
		return nil, CartView{}, fmt.Errorf("qty must be between 1 and 1000, got %d", in.Qty)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.cartFor(req, in.CartID)
	if err != nil {
		return nil, CartView{}, err
	}
	c.status = "open" // adding to a checked-out or paid cart reopens it
	for i := range c.items {
		if c.items[i].SKU == in.SKU {
			c.items[i].Qty += qty
			c.items[i].TotalCents = c.items[i].Qty * c.items[i].UnitCents
			return nil, c.view(), nil
		}
	}
	c.items = append(c.items, CartItem{SKU: in.SKU, Name: p.name, Qty: qty, UnitCents: p.cents, TotalCents: qty * p.cents})
	return nil, c.view(), nil
}

func (s *store) cartCheckout(_ context.Context, req *mcp.CallToolRequest, in cartIn) (*mcp.CallToolResult, CartView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.cartFor(req, in.CartID)
	if err != nil {
		return nil, CartView{}, err
	}
	if len(c.items) == 0 {
		return nil, CartView{}, errors.New("the cart is empty: add items with cart.add_item first")
	}
	c.status = "checked_out"
	return nil, c.view(), nil
}

func (s *store) cartPay(_ context.Context, req *mcp.CallToolRequest, in cartPayIn) (*mcp.CallToolResult, Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.cartFor(req, in.CartID)
	if err != nil {
		return nil, Order{}, err
	}
	if len(c.items) == 0 {
		return nil, Order{}, errors.New("the cart is empty: nothing to pay")
	}
	total := c.total()
	if in.Amount != nil {
		if got := math.Round(*in.Amount * 100); got != float64(total) {
			return nil, Order{}, fmt.Errorf("amount %.2f does not match the cart total %.2f", *in.Amount, float64(total)/100)
		}
	}
	o := Order{
		OrderID:   "ORD-" + strconv.Itoa(s.nextOrder),
		CartID:    c.id,
		PaidCents: total,
		Items:     c.items,
	}
	s.nextOrder++
	c.items = nil
	c.status = "paid"
	o.CartStatus = c.status
	return nil, o, nil
}

func (s *store) cartView(_ context.Context, req *mcp.CallToolRequest, in cartIn) (*mcp.CallToolResult, CartView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.cartFor(req, in.CartID)
	if err != nil {
		return nil, CartView{}, err
	}
	return nil, c.view(), nil
}

func (s *store) bulkImport(_ context.Context, _ *mcp.CallToolRequest, in bulkImportIn) (*mcp.CallToolResult, bulkImportOut, error) {
	return nil, bulkImportOut{Imported: len(in.Rows)}, nil
}

func (s *store) slowWait(ctx context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, slowOut, error) {
	start := time.Now()
	if s.slowStart != nil {
		s.slowStart()
	}
	t := time.NewTimer(s.slowDelay)
	defer t.Stop()
	var err error
	select {
	case <-t.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if s.slowDone != nil {
		s.slowDone(err)
	}
	if err != nil {
		return nil, slowOut{}, fmt.Errorf("slow.wait interrupted: %w", err)
	}
	return nil, slowOut{SleptMs: time.Since(start).Milliseconds()}, nil
}

const maxReportKB = 4096

func (s *store) reportsBig(_ context.Context, _ *mcp.CallToolRequest, in reportsBigIn) (*mcp.CallToolResult, reportOut, error) {
	if in.KB < 1 || in.KB > maxReportKB {
		return nil, reportOut{}, fmt.Errorf("kb must be between 1 and %d, got %d", maxReportKB, in.KB)
	}
	size := in.KB * 1024
	var b strings.Builder
	b.Grow(size)
	lines := 0
	for b.Len() < size {
		lines++
		line := fmt.Sprintf("row %06d: quarterly figures, region %s, revenue %d.%02d, units %d\n",
			lines, countries[lines%len(countries)].Code, lines*137%100000, lines%100, lines*7%1000)
		if rest := size - b.Len(); len(line) > rest {
			line = line[:rest-1] + "\n"
		}
		b.WriteString(line)
	}
	text := b.String()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}},
		reportOut{KB: in.KB, Bytes: len(text), Lines: lines}, nil
}

func (s *store) usersGet(_ context.Context, _ *mcp.CallToolRequest, in usersGetIn) (*mcp.CallToolResult, User, error) {
	for _, u := range users {
		if u.ID == in.ID {
			return nil, u, nil
		}
	}
	return nil, User{}, fmt.Errorf("unknown user id %q (known: u1, u2, u3)", in.ID)
}
