/*
 * gw.c - the gateway over its two pipes: starting `sandgate serve`,
 * writing one request at a time on the host's wire and reading its reply
 * (process events read meanwhile are counted and dropped), and the tool
 * calls every set makes.
 */
#include "bench/sgbench.h"

/*
 * Start `sandgate serve` on the profile o names, its stderr into
 * <state_dir>/<log_name>, with the environment envp.
 */
void gw_start(struct gw *g, const struct opts *o, const char *sandgate,
		     const char *state_dir, const char *log_name, char *const *envp)
{
	int in_p[2], out_p[2], errfd;
	posix_spawn_file_actions_t fa;
	char *log = xasprintf("%s/%s", state_dir, log_name);
	char *argv[12] = { (char *)sandgate, "serve", "--state-dir", (char *)state_dir,
			   "--log-level", "info", NULL };
	int e, k = 6;

	if (o->config) {
		argv[k++] = "--config";
		argv[k++] = (char *)o->config;
	}
	if (o->profile) {
		argv[k++] = "--profile";
		argv[k++] = (char *)o->profile;
	}

	memset(g, 0, sizeof(*g));
	if (pipe2(in_p, O_CLOEXEC) || pipe2(out_p, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	errfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (errfd < 0)
		die("%s: %s", log, strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in_p[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out_p[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errfd, 2);
	e = posix_spawn(&g->pid, sandgate, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		die("cannot start %s: %s", sandgate, strerror(e));
	close(in_p[0]);
	close(out_p[1]);
	close(errfd);
	g->to = in_p[1];
	g->from = out_p[0];
	g->cap = 1 * MiB;
	g->buf = malloc(g->cap);
	g->req_cap = 4 * KiB;
	g->req = malloc(g->req_cap);
	if (!g->buf || !g->req)
		die("out of memory");
	g->next_id = 1;
	free(log);
}

/*
 * The line gw_line returned last, dropped from the buffer.  gw_line does
 * this itself first; callers that keep no pointer into the line may do it
 * earlier, so the buffer is compacted before the next read.
 */
void gw_line_done(struct gw *g)
{
	size_t used;

	if (!g->held)
		return;
	used = g->line_len + 1;
	memmove(g->buf, g->buf + used, g->len - used);
	g->len -= used;
	g->held = false;
	g->line_len = 0;
	g->scanned = 0;
}

/*
 * The next line from the gateway, newline excluded and NUL-terminated,
 * valid until the next call; its length in g->line_len.  Dies at EOF or
 * past the deadline.
 */
char *gw_line(struct gw *g, int64_t deadline_ns)
{
	gw_line_done(g);
	for (;;) {
		char *nl = memchr(g->buf + g->scanned, '\n', g->len - g->scanned);
		struct pollfd pfd = { g->from, POLLIN, 0 };
		int64_t left;
		ssize_t n;

		if (nl) {
			g->line_len = (size_t)(nl - g->buf);
			g->held = true;
			*nl = '\0';
			return g->buf;
		}
		g->scanned = g->len;
		if (g->len == g->cap) {
			if (g->cap >= LINE_MAX_BYTES)
				die("a reply line exceeds %zu bytes", LINE_MAX_BYTES);
			g->cap *= 2;
			g->buf = realloc(g->buf, g->cap);
			if (!g->buf)
				die("out of memory");
		}
		left = (deadline_ns - now_ns()) / 1000000;
		if (left <= 0)
			die("no reply from the gateway within the deadline");
		if (poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left) < 0) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		if (!pfd.revents)
			continue;
		n = read(g->from, g->buf + g->len, g->cap - g->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("the gateway closed its stdout (its stderr is gateway.log)");
		g->len += (size_t)n;
	}
}

/*
 * Send {"id":"N","method":M,"token":T,"data":DATA}; returns N.  The id is a
 * JSON string, a decimal counter, as the host writes it.
 */
int64_t gw_send(struct gw *g, const char *method, const char *data)
{
	int64_t id = g->next_id++;
	size_t need = strlen(method) + strlen(data) + 128;
	int n;

	if (need > g->req_cap) {
		free(g->req);
		g->req_cap = need;
		g->req = malloc(need);
		if (!g->req)
			die("out of memory");
	}
	n = snprintf(g->req, g->req_cap,
		     "{\"id\":\"%" PRId64 "\",\"method\":\"%s\",\"token\":\"" TOKEN
		     "\",\"data\":%s}\n",
		     id, method, data);
	if (n < 0 || (size_t)n >= g->req_cap)
		die("request too long");
	write_all(g->to, g->req, (size_t)n);
	return id;
}

json_t *bench_profile(const struct opts *o, const char *refusal, json_t **cfg,
		      const char **name)
{
	const char *path = o->config ? o->config : getenv("SANDGATE_CONFIG");
	json_error_t je;
	json_t *prof;

	if (!path || !*path)
		die("%s", refusal);
	*cfg = json_load_file(path, 0, &je);
	if (!*cfg)
		die("%s: %s (line %d)", path, je.text, je.line);
	*name = o->profile ? o->profile : json_string_value(json_object_get(*cfg, "default"));
	prof = json_object_get(json_object_get(*cfg, "profiles"), *name ? *name : "");
	if (!json_is_object(prof))
		die("%s has no profile %s", path, *name ? *name : "(no default)");
	return prof;
}

json_t *parse_line(const char *p, size_t n)
{
	json_error_t je;
	json_t *j = json_loadb(p, n, JSON_ALLOW_NUL, &je);

	if (!j)
		die("unreadable line from the gateway: %s: %.200s", je.text, p);
	return j;
}

/* Whether the string id s is the decimal n. */
bool id_is(const char *s, int64_t n)
{
	char want[32];

	snprintf(want, sizeof(want), "%" PRId64, n);
	return strcmp(s, want) == 0;
}

/*
 * Wait for the reply to `id`; returns its frame (new) and, in *at, when
 * its line was complete.  Events read meanwhile are counted and dropped.
 */
json_t *gw_reply(struct gw *g, int64_t id, int64_t *at)
{
	int64_t deadline = now_ns() + REPLY_DEADLINE_MS * 1000000LL;

	for (;;) {
		char *line = gw_line(g, deadline);
		int64_t t = now_ns();
		json_t *j = parse_line(line, g->line_len);
		json_t *jid = json_object_get(j, "id");

		gw_line_done(g);
		if (json_is_string(jid) && id_is(json_string_value(jid), id)) {
			if (at)
				*at = t;
			return j;
		}
		if (json_object_get(j, "method"))
			g->events++;
		else
			die("a reply to an unknown id arrived");
		json_decref(j);
	}
}

/* The reply's data (borrowed from frame), or death with its error. */
json_t *reply_data(json_t *frame, const char *what)
{
	json_t *d = json_object_get(frame, "data");

	if (!d)
		die("%s failed: %s", what,
		    json_string_value(json_object_get(frame, "error")) ?
			    json_string_value(json_object_get(frame, "error")) :
			    "no data");
	return d;
}

json_t *gw_call(struct gw *g, const char *method, json_t *data)
{
	char *text = json_dumps(data, JSON_COMPACT);
	int64_t id;
	json_t *r;

	if (!text)
		die("out of memory");
	json_decref(data);
	id = gw_send(g, method, text);
	free(text);
	r = gw_reply(g, id, NULL);
	return r;
}

/*
 * initialize as the host sends it: protocol version 4, the session SESSION
 * at ROOT, its workspace removed when the gateway stops.  Returns the
 * reply's frame (new); dies when initialize failed.
 */
json_t *gw_initialize(struct gw *g)
{
	json_t *f = gw_call(g, "initialize",
			    json_pack("{s:i, s:s, s:s, s:b}", "version", 4, "root", ROOT,
				      "session", SESSION, "remove_workspace_on_exit", true));

	reply_data(f, "initialize");
	return f;
}

/*
 * An execute data object for `tool` with the arguments object (steals): the
 * host's shape, the tool in call.name and its arguments as a JSON string,
 * the main agent (actor = the binding's session), standard mode.
 */
char *execute_data(const char *tool, json_t *args)
{
	char *a = json_dumps(args, JSON_COMPACT);
	json_t *d;
	char *text;

	if (!a)
		die("out of memory");
	json_decref(args);
	d = json_pack("{s:{s:s, s:s, s:s, s:s}, s:s, s:s}", "call", "id", "call_sgbench",
		      "name", tool, "arguments", a, "kind", "function", "actor", SESSION,
		      "permission_mode", "standard");
	free(a);
	text = json_dumps(d, JSON_COMPACT);
	json_decref(d);
	if (!text)
		die("out of memory");
	return text;
}

/*
 * A ToolResult that ran, or death: a failed tool is an error reply, which
 * reply_data reports.
 */
json_t *check_tool(json_t *frame, const char *what)
{
	json_t *d = reply_data(frame, what);

	if (!json_is_array(json_object_get(d, "content")))
		die("%s: the result has no content parts", what);
	return d;
}

/* The text of a ToolResult's first part (borrowed; "" when it has none). */
const char *tool_text(json_t *d)
{
	const char *t = json_string_value(
		json_object_get(json_array_get(json_object_get(d, "content"), 0), "text"));

	return t ? t : "";
}

/* The first text part of a ToolResult parsed as the tool's JSON view (new). */
static json_t *tool_view(json_t *d, const char *what)
{
	json_error_t je;
	json_t *v = json_loads(tool_text(d), 0, &je);

	if (!v)
		die("%s: the result's text is not a JSON view: %s", what, je.text);
	return v;
}

/* A number from a ToolResult's JSON view (-1 when absent). */
json_int_t view_int(json_t *d, const char *key, const char *what)
{
	json_t *v = tool_view(d, what);
	json_int_t n = json_is_integer(json_object_get(v, key)) ?
			       json_integer_value(json_object_get(v, key)) : -1;

	json_decref(v);
	return n;
}

/*
 * read_file's arguments for path (new).  An actor that reads the same range
 * of an unchanged file again gets the host's read_unchanged stub, without
 * the text; each read here asks for a range of its own (a line limit past
 * any file's end), so every one returns the whole file, as the SDKs'
 * reads do.  A limit also lets a file over 256 KiB be read whole.
 */
#define READ_LIMIT 1000000
json_t *read_args(const char *path)
{
	static long reads;
	json_int_t limit = READ_LIMIT + reads++ % READ_LIMIT;

	return json_pack("{s:s, s:I}", "path", path, "limit", limit);
}

/* edit_file's arguments (new): the i-th swap of "sgbench a" and "sgbench b". */
json_t *edit_args(const char *path, long i)
{
	return json_pack("{s:s, s:s, s:s}", "path", path, "old_text",
			 i % 2 ? "sgbench b" : "sgbench a", "new_text",
			 i % 2 ? "sgbench a" : "sgbench b");
}

/* process/read of id from offset 0 without waiting, options nested (new). */
json_t *pread_data(const char *id)
{
	return json_pack("{s:s, s:{s:i, s:i, s:i, s:i}}", "id", id, "options", "OffsetBytes", 0,
			 "Wait", 0, "MinDwell", 0, "MaxBytes", 0);
}

int gw_stop(struct gw *g)
{
	int status = 0;
	int64_t deadline = now_ns() + 30000000000LL;

	close(g->to);
	for (;;) {
		pid_t r = waitpid(g->pid, &status, WNOHANG);

		if (r == g->pid)
			break;
		if (r < 0 && errno != EINTR)
			die("waitpid: %s", strerror(errno));
		if (now_ns() > deadline) {
			fprintf(stderr, "sgbench: the gateway did not exit in 30 s; killing it\n");
			kill(g->pid, SIGKILL);
			waitpid(g->pid, &status, 0);
			break;
		}
		sleep_ms(5);
	}
	close(g->from);
	free(g->buf);
	free(g->req);
	return status;
}

/* One bash call of data through the gateway: its round trip, exit 0 checked. */
int64_t gateway_cmd(struct gw *g, const char *data)
{
	int64_t t0 = now_ns(), t1, id;
	json_t *f, *d;

	id = gw_send(g, "execute", data);
	f = gw_reply(g, id, &t1);
	d = check_tool(f, "bash");
	if (!json_is_integer(json_object_get(json_object_get(d, "structured_content"),
					     "exit_code")) ||
	    json_integer_value(json_object_get(json_object_get(d, "structured_content"),
					       "exit_code")) != 0)
		die("bash true did not exit 0: %.300s", tool_text(d));
	json_decref(f);
	return t1 - t0;
}

/*
 * present_artifact of path: its export token into token[cap]; returns the
 * size it reports.  This is how an export starts on the host's wire (there
 * is no export/open): one text part {"execution_export","name","size"}.
 */
int64_t present_artifact(struct gw *g, const char *path, char *token, size_t cap)
{
	char *data = execute_data("present_artifact", json_pack("{s:s}", "path", path));
	json_t *f = gw_reply(g, gw_send(g, "execute", data), NULL);
	json_t *v = tool_view(check_tool(f, "present_artifact"), "present_artifact");
	const char *t = json_string_value(json_object_get(v, "execution_export"));
	int64_t size = json_integer_value(json_object_get(v, "size"));

	if (!t || snprintf(token, cap, "%s", t) >= (int)cap)
		die("present_artifact: no export token");
	json_decref(v);
	json_decref(f);
	free(data);
	return size;
}

void execute_ok(struct gw *g, const char *tool, json_t *args)
{
	char *data = execute_data(tool, args);
	json_t *f = gw_reply(g, gw_send(g, "execute", data), NULL);

	check_tool(f, tool);
	json_decref(f);
	free(data);
}

/* process/start of a command string; the process id into id[64]. */
void start_process(struct gw *g, const char *command, char id[64])
{
	json_t *f = gw_call(g, "process/start", json_pack("{s:s}", "command", command));
	json_t *d = reply_data(f, "process/start");
	const char *status = json_string_value(json_object_get(d, "status"));

	if (!json_is_string(json_object_get(d, "id")) || !status ||
	    (strcmp(status, "running") != 0 && strcmp(status, "starting") != 0))
		die("process/start did not start a process");
	snprintf(id, 64, "%s", json_string_value(json_object_get(d, "id")));
	json_decref(f);
}

/*
 * The export of path, whole, as the host does it: present_artifact, one
 * export/read from 0 (a small file fits one chunk), export/close.
 */
void export_whole(struct gw *g, const char *path)
{
	char token[128];
	json_t *f;

	present_artifact(g, path, token, sizeof(token));
	f = gw_call(g, "export/read", json_pack("{s:s, s:i}", "token", token, "offset", 0));
	reply_data(f, "export/read");
	json_decref(f);
	f = gw_call(g, "export/close", json_pack("{s:s}", "token", token));
	reply_data(f, "export/close");
	json_decref(f);
}
