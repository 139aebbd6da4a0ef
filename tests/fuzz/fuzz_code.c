/*
 * fuzz_code.c - run_code's handling of what sg-jsrun writes, under
 * libFuzzer.
 *
 * sg-jsrun runs a model's program in an engine that may be broken, so the
 * gateway treats its every line as hostile (gateway/code.c).  Each input is
 * one program's traffic, a line at a time, fed through the line seam
 * (code.h) to a run of a fixed request: a line that starts with '@' is the
 * host's answer to the newest nested call still waiting (the callback
 * frame's data), as the reader thread would deliver it; every other line
 * is one sg-jsrun wrote (log, call, done).  The first byte picks the result
 * view.  After each input the run's reply must have the host's shape and
 * bounds, no callback may be left registered, and every `tool` frame sent
 * to the host must be one a program could cause: an offered name and
 * arguments that are JSON text.  A second run then clears the state
 * scope, so every input starts from the same state.
 * tests/fuzz/corpus-code holds traffic recorded from a real sg-jsrun.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cancel.h"
#include "gateway/code.h"
#include "gateway/pool.h"
#include "gateway/session.h"
#include "gateway/wire.h"

/* The host's bound on a whole RunResult (protocol section 7). */
#define FUZZ_RESULT_MAX ((size_t)3 << 20)

/* Ends what the wire wrote for one input (the harness writes it). */
#define FUZZ_MARK "#end\n"

static struct sg_session session;

/* What the wire wrote: the reader thread's, under sent_lock. */
static pthread_mutex_t sent_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sent_more = PTHREAD_COND_INITIALIZER;
static char *sent;
static size_t sent_len;
static int sent_fd[2];

static void *read_sent(void *unused)
{
	char buf[65536];
	ssize_t n;

	(void)unused;
	while ((n = read(sent_fd[0], buf, sizeof buf)) > 0) {
		pthread_mutex_lock(&sent_lock);
		sent = realloc(sent, sent_len + (size_t)n + 1);
		if (!sent)
			abort();
		memcpy(sent + sent_len, buf, (size_t)n);
		sent_len += (size_t)n;
		sent[sent_len] = '\0';
		pthread_cond_signal(&sent_more);
		pthread_mutex_unlock(&sent_lock);
	}
	return NULL;
}

/* One session for every input; its wire writes to the reader thread. */
static void session_once(void)
{
	int null = open("/dev/null", O_RDONLY);
	pthread_t reader;

	pthread_mutex_init(&session.callback_lock, NULL);
	if (null < 0 || pipe(sent_fd) || pthread_create(&reader, NULL, read_sent, NULL) ||
	    sg_wire_new(null, sent_fd[1], NULL, NULL, &session.wire) != SG_OK)
		abort();
}

/* A frame a program could cause: a tool call of an offered name whose
 * arguments are JSON text. */
static void check_frame(const char *line)
{
	json_t *frame = json_loads(line, 0, NULL), *data = json_object_get(frame, "data");
	json_t *args = json_object_get(data, "arguments"), *parsed;
	const char *name = json_string_value(json_object_get(data, "name"));

	if (!json_is_string(args) || !name ||
	    (strcmp(name, "t") != 0 && strcmp(name, "read_file") != 0 && strcmp(name, "x") != 0))
		abort();
	parsed = json_loadb(json_string_value(args), json_string_length(args),
			    JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, NULL);
	if (!parsed)
		abort();
	json_decref(parsed);
	json_decref(frame);
}

/* Every frame the wire wrote for this input, once the mark follows them. */
static void check_sent(void)
{
	char *line, *nl;

	if (!sg_wire_flush(session.wire, sg_now_ms() + 10000) ||
	    write(sent_fd[1], FUZZ_MARK, strlen(FUZZ_MARK)) != (ssize_t)strlen(FUZZ_MARK))
		abort();
	pthread_mutex_lock(&sent_lock);
	while (sent_len < strlen(FUZZ_MARK) ||
	       strcmp(sent + sent_len - strlen(FUZZ_MARK), FUZZ_MARK) != 0)
		pthread_cond_wait(&sent_more, &sent_lock);
	sent[sent_len - strlen(FUZZ_MARK)] = '\0';
	for (line = sent; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		check_frame(line);
	}
	free(sent);
	sent = NULL;
	sent_len = 0;
	pthread_mutex_unlock(&sent_lock);
}

static struct sg_op *request(bool model_text)
{
	json_t *frame = json_pack("{s:s, s:s, s:{s:{s:s, s:[{s:s}, {s:s}, {s:s}], s:s}, s:s}}",
				  "id", "fuzz", "method", "run_code", "data", "program", "code",
				  "return 1", "tools", "name", "t", "name", "read_file", "name",
				  "x", "result_view", model_text ? "model_text" : "canonical",
				  "actor", "fuzz");
	struct sg_op *op = frame ? sg_op_new(&session, frame, "run_code") : NULL;

	if (!op)
		abort();
	return op;
}

/* The ids this input's '@' lines answered, so the next answers another. */
static char answered[256][32];
static size_t nanswered;

static bool was_answered(const char *id)
{
	for (size_t i = 0; i < nanswered; i++)
		if (strcmp(answered[i], id) == 0)
			return true;
	return false;
}

/*
 * The host's answer (line without its '@') to the newest call this input
 * has not answered yet, or, when it answered all, to the newest again (a
 * duplicate callback, which must be dropped).
 */
static void answer(const char *line, size_t n)
{
	json_t *data = json_loadb(line, n, 0, NULL);
	char id[32] = "";

	pthread_mutex_lock(&session.callback_lock);
	for (struct sg_callback *cb = session.callbacks; cb; cb = cb->next) {
		if (!id[0] || !was_answered(cb->id))
			snprintf(id, sizeof id, "%s", cb->id);
		if (!was_answered(cb->id))
			break;
	}
	pthread_mutex_unlock(&session.callback_lock);
	if (id[0] && !was_answered(id) && nanswered < sizeof answered / sizeof answered[0])
		snprintf(answered[nanswered++], sizeof answered[0], "%s", id);
	/* The server delivers only an object (server.c, do_callback). */
	if (id[0] && json_is_object(data))
		(void)sg_callback_deliver(&session, id, data);
	json_decref(data);
}

static void check_reply(json_t *reply)
{
	size_t n = json_dumpb(reply, NULL, 0, JSON_COMPACT);

	if (!json_is_array(json_object_get(reply, "Logs")) ||
	    !json_is_array(json_object_get(reply, "Media")) ||
	    !json_is_string(json_object_get(reply, "Error")) ||
	    !json_is_string(json_object_get(reply, "CallSummary")) || n > FUZZ_RESULT_MAX)
		abort();
}

/* One run fed text's lines; its reply checked. */
static void run(const char *text, size_t size, bool model_text)
{
	struct sg_op *op = request(model_text);
	struct sg_code_seam *seam;
	json_t *reply = NULL;

	nanswered = 0;
	if (sg_code_seam_open(op, &seam) != SG_OK)
		abort();
	while (size > 0) {
		const char *nl = memchr(text, '\n', size);
		size_t n = nl ? (size_t)(nl - text) : size;

		if (n > 0 && text[0] == '@')
			answer(text + 1, n - 1);
		else if (!sg_code_seam_line(seam, text, n))
			break;
		text += nl ? n + 1 : n;
		size -= nl ? n + 1 : n;
	}
	if (sg_code_seam_close(seam, &reply) != SG_OK || session.callbacks)
		abort();
	check_reply(reply);
	json_decref(reply);
	sg_op_free(op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static const char clear[] = "{\"t\":\"done\",\"state\":{}}";

	pthread_once(&once, session_once);
	if (size < 1)
		return 0;
	run((const char *)data + 1, size - 1, data[0] & 1);
	run(clear, sizeof clear - 1, false);
	/* Also frees what the input queued on the wire within the input, or
	 * libFuzzer would look for leaks after every one. */
	check_sent();
	return 0;
}
