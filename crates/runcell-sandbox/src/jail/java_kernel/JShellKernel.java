// runcell's Java engine: JShell (the JDK's own `jdk.jshell` API) run in
// this JVM, driven by `java_kernel.py` (an ipykernel wrapper kernel, which
// speaks Jupyter) over this process's stdin and stdout.
//
// Why JShell in this JVM ("local" execution): JShell's default runs
// snippets in a second JVM it reaches over a socket, which a jail without a
// network cannot give it, and which would double the memory of every idle
// kernel. Snippets are compiled by the JDK's javac and keep their state
// between cells (variables, methods, classes, imports) as in `jshell`.
//
// The wire, both ways: frames of `NAME LENGTH\n` followed by LENGTH bytes
// of UTF-8; a payload of several fields separates them with NUL.
//   in:  exec CODE | complete CURSOR\0CODE | inspect CURSOR\0CODE
//        | is_complete CODE | stop (handled at once, even during an exec)
//   out: out TEXT | err TEXT (a cell's System.out and System.err, as written)
//        | result TEXT (the cell's last expression, as text)
//        | error NAME\0VALUE\0TRACEBACK | done (an exec ended)
//        | matches START\0END\0M1\0M2... | found TEXT | complete STATUS\0INDENT
//        | ready (once, when JShell is up)
//        | display ID\0MIME\0DATA | update ID\0MIME\0DATA | clear WAIT
//          (what a cell's display(), updateDisplay() and clearOutput() ask)
//
// Usage: java JShellKernel.java (run by java_kernel.py in a session's jail)

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.LinkedBlockingQueue;
import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.UnresolvedReferenceException;

public class JShellKernel {
    /** The largest frame read (a program is bounded by the server too). */
    static final int MAX_FRAME = 4 << 20;
    /** The most completions answered. */
    static final int MAX_MATCHES = 1000;
    /** The most characters of an inspected value's text. */
    static final int MAX_INSPECT = 10_000;

    static final Object WIRE = new Object();
    /** Each snippet's first line in the cell it came from, by its id. */
    static final java.util.Map<String, Integer> FIRST_LINES = new java.util.HashMap<>();
    /** The snippets of the cell running now. */
    static final java.util.Set<String> THIS_CELL = new java.util.HashSet<>();
    /** Whether the running cell was asked to stop. */
    static volatile boolean stopped;
    static OutputStream wire;

    /** Whether this JVM runs one program (`--run FILE`), with no wrapper. */
    static boolean script;
    /** Whether the program (`--run`) failed. */
    static boolean failed;
    static final OutputStream REAL_ERR = new java.io.FileOutputStream(java.io.FileDescriptor.err);

    public static void main(String[] args) throws Exception {
        wire = new java.io.FileOutputStream(java.io.FileDescriptor.out);
        script = args.length == 2 && args[0].equals("--run");
        // A cell's System.out and System.err become frames; nothing else
        // may write to the real stdout.
        PrintStream out = new CellStream(new Framed("out"));
        PrintStream err = new CellStream(new Framed("err"));
        System.setOut(out);
        System.setErr(err);
        JShell shell = JShell.builder()
                .executionEngine("local")
                .out(out)
                .err(err)
                .build();
        if (script) {
            // One program, as a script: what it prints, its error on
            // stderr, and the exit status; its last value is not shown.
            String code = java.nio.file.Files.readString(java.nio.file.Path.of(args[1]));
            exec(shell, shell.sourceCodeAnalysis(), code);
            out.flush();
            err.flush();
            System.exit(failed ? 1 : 0);
        }
        // The first snippet loads javac: done here, before the first cell.
        shell.eval("Math.abs(0)");
        for (String snippet : DISPLAY_API) {
            shell.eval(snippet);
        }
        LinkedBlockingQueue<String[]> work = new LinkedBlockingQueue<>();
        Thread worker = new Thread(() -> serve(shell, work), "runcell-jshell");
        worker.setDaemon(true);
        worker.start();
        // What a cell printed without a newline yet is sent within 0.2 s.
        Thread flusher = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    return;
                }
                out.flush();
                err.flush();
            }
        }, "runcell-flush");
        flusher.setDaemon(true);
        flusher.start();
        send("ready", "");
        InputStream in = new BufferedInputStream(System.in);
        while (true) {
            String[] frame = read(in);
            if (frame == null) {
                System.exit(0);
            }
            if (frame[0].equals("stop")) {
                stopped = true;
                shell.stop();
            } else {
                work.put(frame);
            }
        }
    }

    /** Answers requests one at a time, in the order they came. */
    static void serve(JShell shell, LinkedBlockingQueue<String[]> work) {
        SourceCodeAnalysis analysis = shell.sourceCodeAnalysis();
        while (true) {
            String[] frame;
            try {
                frame = work.take();
            } catch (InterruptedException e) {
                return;
            }
            try {
                String name = frame[0], body = frame[1];
                switch (name) {
                    case "exec" -> exec(shell, analysis, body);
                    case "complete" -> complete(analysis, body);
                    case "inspect" -> inspect(analysis, body);
                    case "is_complete" -> isComplete(analysis, body);
                    default -> send("error", "ProtocolError\0unknown request " + name + "\0");
                }
            } catch (Throwable t) {
                // A request that broke JShell itself ends as an error, and
                // the kernel goes on.
                send("error", t.getClass().getName() + "\0" + String.valueOf(t.getMessage()) + "\0");
                if (frame[0].equals("exec")) {
                    send("done", "");
                }
            }
            System.out.flush();
            System.err.flush();
        }
    }

    /**
     * What cells may call to show things, as E2B's Java kernel (IJava) names
     * them: `display(value)` or `display(value, mime)` returns the display's
     * id, `updateDisplay(id, value[, mime])` replaces what that display
     * shows, `clearOutput()` (or `clearOutput(true)`: at the next output)
     * clears the cell's output. They reach this class by name, through the
     * class path (the engine's compiled classes; when the JVM compiled the
     * source itself, the class is out of their reach and they say so):
     * JShell compiles snippets apart from it. A cell may define its own methods of these names.
     * Each overload calls the bridge itself: in Java a method named like
     * the one it is in hides the other overloads from its body.
     */
    static final String[] DISPLAY_API = {
        "Object $runcell(String what, Object... args) { try { return Class.forName(\"JShellKernel\").getMethod(\"bridge\", String.class, Object[].class).invoke(null, what, args); } catch (java.lang.reflect.InvocationTargetException e) { throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause()); } catch (ReflectiveOperationException e) { throw new IllegalStateException(\"display is not available in this kernel\", e); } }",
        "String display(Object value, String mime) { return (String) $runcell(\"display\", value, mime); }",
        "String display(Object value) { return (String) $runcell(\"display\", value, \"text/plain\"); }",
        "void updateDisplay(String id, Object value, String mime) { $runcell(\"update\", id, value, mime); }",
        "void updateDisplay(String id, Object value) { $runcell(\"update\", id, value, \"text/plain\"); }",
        "void clearOutput(boolean wait) { $runcell(\"clear\", wait); }",
        "void clearOutput() { $runcell(\"clear\", false); }",
    };

    /** The most bytes one display may carry (the server bounds outputs too). */
    static final int MAX_DISPLAY = 8 << 20;

    /** Called by the display API's snippets (see {@link #DISPLAY_API}). */
    public static Object bridge(String what, Object[] args) {
        System.out.flush();
        System.err.flush();
        switch (what) {
            case "display", "update" -> {
                String id = what.equals("display") ? java.util.UUID.randomUUID().toString() : String.valueOf(args[0]);
                int at = what.equals("display") ? 0 : 1;
                Object value = args[at];
                String mime = args[at + 1] == null ? "text/plain" : String.valueOf(args[at + 1]);
                if (mime.isEmpty() || mime.length() > 100 || mime.indexOf('\0') >= 0) {
                    throw new IllegalArgumentException("not a MIME type: " + mime);
                }
                String data = value instanceof byte[] bytes
                        ? java.util.Base64.getEncoder().encodeToString(bytes)
                        : String.valueOf(value);
                if (data.length() > MAX_DISPLAY) {
                    throw new IllegalArgumentException("a display of " + data.length() + " characters (at most " + MAX_DISPLAY + ")");
                }
                send(what, id + "\0" + mime + "\0" + data);
                return id;
            }
            case "clear" -> {
                send("clear", Boolean.TRUE.equals(args[0]) ? "wait" : "");
                return null;
            }
            default -> throw new IllegalArgumentException(what);
        }
    }

    /** Runs a cell: its snippets one by one, stopping at the first error. */
    static void exec(JShell shell, SourceCodeAnalysis analysis, String code) {
        String rest = code;
        int offset = 0;
        String last = null;
        stopped = false;
        THIS_CELL.clear();
        while (!rest.isBlank()) {
            SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(rest);
            String source = info.source();
            if (source == null || info.completeness() == SourceCodeAnalysis.Completeness.DEFINITELY_INCOMPLETE
                    || info.completeness() == SourceCodeAnalysis.Completeness.CONSIDERED_INCOMPLETE) {
                // The rest does not end: JShell's own message for it.
                source = rest;
            }
            int consumed = rest.length() - info.remaining().length();
            if (source == rest || consumed <= 0) {
                consumed = rest.length();
            }
            int start = offset + leading(rest);
            last = null;
            for (SnippetEvent event : shell.eval(source)) {
                if (event.causeSnippet() != null) {
                    continue; // an update of a dependent snippet
                }
                if (FIRST_LINES.size() < 100_000) {
                    FIRST_LINES.put(event.snippet().id(), lineOf(code, start));
                }
                THIS_CELL.add(event.snippet().id());
                if (event.exception() != null) {
                    thrown(event.exception(), code, start);
                    send("done", "");
                    return;
                }
                if (event.status() == Snippet.Status.REJECTED) {
                    rejected(shell, event.snippet(), code, start);
                    send("done", "");
                    return;
                }
                last = shown(event);
            }
            if (stopped) {
                System.out.flush();
                System.err.flush();
                send("error", "InterruptedException\0the cell was stopped\0InterruptedException: the cell was stopped (line "
                        + lineOf(code, start) + ")\n");
                send("done", "");
                return;
            }
            offset += consumed;
            rest = rest.substring(consumed);
        }
        System.out.flush();
        System.err.flush();
        if (last != null) {
            send("result", last);
        }
        send("done", "");
    }

    static int leading(String text) {
        int i = 0;
        while (i < text.length() && Character.isWhitespace(text.charAt(i))) {
            i++;
        }
        return i;
    }

    /** The text of an expression's value, or null for what shows nothing. */
    static String shown(SnippetEvent event) {
        Snippet snippet = event.snippet();
        String value = event.value();
        if (value == null) {
            return null;
        }
        // A cell ending in `display(x)` shows x, not the display's id.
        if (snippet.source().strip().startsWith("display(")) {
            return null;
        }
        return switch (snippet.subKind()) {
            case TEMP_VAR_EXPRESSION_SUBKIND, VAR_VALUE_SUBKIND, ASSIGNMENT_SUBKIND, OTHER_EXPRESSION_SUBKIND -> {
                String type = snippet instanceof jdk.jshell.VarSnippet v ? v.typeName()
                        : snippet instanceof jdk.jshell.ExpressionSnippet e ? e.typeName() : "";
                yield type.equals("String") || type.equals("java.lang.String") || type.equals("char")
                        ? unquoted(value) : value;
            }
            default -> null;
        };
    }

    /** A Java literal as JShell writes a String or char value, read back. */
    static String unquoted(String literal) {
        if (literal.length() < 2 || (literal.charAt(0) != '"' && literal.charAt(0) != '\'')) {
            return literal; // null
        }
        String body = literal.substring(1, literal.length() - 1);
        StringBuilder text = new StringBuilder(body.length());
        for (int i = 0; i < body.length(); i++) {
            char c = body.charAt(i);
            if (c != '\\' || i + 1 == body.length()) {
                text.append(c);
                continue;
            }
            char next = body.charAt(++i);
            switch (next) {
                case 'n' -> text.append('\n');
                case 't' -> text.append('\t');
                case 'r' -> text.append('\r');
                case 'b' -> text.append('\b');
                case 'f' -> text.append('\f');
                case 's' -> text.append(' ');
                case 'u' -> {
                    int end = Math.min(i + 5, body.length());
                    try {
                        text.append((char) Integer.parseInt(body.substring(i + 1, end), 16));
                        i = end - 1;
                    } catch (NumberFormatException e) {
                        text.append("\\u");
                    }
                }
                default -> {
                    if (next >= '0' && next <= '7') {
                        int end = i;
                        while (end < body.length() && end < i + 3 && body.charAt(end) >= '0' && body.charAt(end) <= '7') {
                            end++;
                        }
                        text.append((char) Integer.parseInt(body.substring(i, end), 8));
                        i = end - 1;
                    } else {
                        text.append(next);
                    }
                }
            }
        }
        return text.toString();
    }

    /** The line (from 1) of `position` in `code`. */
    static int lineOf(String code, int position) {
        int line = 1;
        for (int i = 0; i < Math.min(position, code.length()); i++) {
            if (code.charAt(i) == '\n') {
                line++;
            }
        }
        return line;
    }

    /** A snippet javac refused: its diagnostics, each with its cell line. */
    static void rejected(JShell shell, Snippet snippet, String code, int start) {
        StringBuilder traceback = new StringBuilder();
        String first = null;
        for (Diag diag : (Iterable<Diag>) shell.diagnostics(snippet)::iterator) {
            if (!diag.isError()) {
                continue;
            }
            String message = diag.getMessage(null);
            if (first == null) {
                first = message;
            }
            long at = diag.getStartPosition() >= 0 ? diag.getStartPosition() : diag.getPosition();
            int line = lineOf(code, start + (int) Math.max(0, at));
            traceback.append("line ").append(line).append(": ").append(message).append('\n');
            String text = code.split("\n", -1)[line - 1];
            traceback.append("    ").append(text).append('\n');
        }
        if (first == null) {
            // Rejected with no error of its own: a snippet that depends on
            // one that failed, or one JShell does not take.
            first = "the snippet was not accepted: " + snippet.source().strip();
            traceback.append(first).append('\n');
        }
        send("error", "CompilationException\0" + first + "\0" + traceback);
    }

    /** An exception a snippet threw, with the cell's line for its frames. */
    static void thrown(Exception exception, String code, int start) {
        String name;
        String value = exception.getMessage() == null ? "" : exception.getMessage();
        if (exception instanceof EvalException eval) {
            name = eval.getExceptionClassName();
        } else if (exception instanceof UnresolvedReferenceException unresolved) {
            name = "UnresolvedReferenceException";
            value = "'" + unresolved.getSnippet().source().strip() + "' refers to something not yet defined";
        } else {
            name = exception.getClass().getName();
        }
        StringBuilder traceback = new StringBuilder(name);
        if (!value.isEmpty()) {
            traceback.append(": ").append(value);
        }
        traceback.append('\n');
        for (StackTraceElement frame : exception.getStackTrace()) {
            String file = frame.getFileName();
            // JShell names a snippet's source `#ID`: its lines count from
            // the snippet's first line in the cell it came from.
            if (file != null && file.startsWith("#") && frame.getLineNumber() > 0) {
                String id = file.substring(1);
                if (!FIRST_LINES.containsKey(id)) {
                    continue; // the kernel's own snippets (the display API)
                }
                int line = FIRST_LINES.get(id) + frame.getLineNumber() - 1;
                String method = frame.getMethodName().isEmpty() ? "" : frame.getMethodName() + ", ";
                traceback.append("\tat ").append(method).append("line ").append(line)
                        .append(THIS_CELL.contains(id) ? "" : " of an earlier cell").append('\n');
            } else if (!frame.getClassName().startsWith("jdk.jshell.") && !frame.getClassName().startsWith("REPL.")
                    && !frame.getClassName().startsWith("jdk.internal.reflect.")
                    && !frame.getClassName().equals("java.lang.reflect.Method")
                    && !frame.getClassName().startsWith("JShellKernel")) {
                traceback.append("\tat ").append(frame).append('\n');
            }
        }
        Throwable cause = exception.getCause();
        for (int depth = 0; cause != null && depth < 5; depth++, cause = cause.getCause()) {
            traceback.append("Caused by: ").append(cause).append('\n');
        }
        send("error", name + "\0" + value + "\0" + traceback);
    }

    static String[] cursorAndCode(String body) {
        int nul = body.indexOf('\0');
        if (nul < 0) {
            return new String[] {"0", body};
        }
        return new String[] {body.substring(0, nul), body.substring(nul + 1)};
    }

    /** The cursor, in UTF-16 units, from Jupyter's code points. */
    static int cursor(String code, String codePoints) {
        int points;
        try {
            points = Integer.parseInt(codePoints.strip());
        } catch (NumberFormatException e) {
            points = code.codePointCount(0, code.length());
        }
        points = Math.max(0, Math.min(points, code.codePointCount(0, code.length())));
        return code.offsetByCodePoints(0, points);
    }

    static int codePoints(String code, int units) {
        return code.codePointCount(0, Math.max(0, Math.min(units, code.length())));
    }

    static void complete(SourceCodeAnalysis analysis, String body) {
        String[] parts = cursorAndCode(body);
        String code = parts[1];
        int at = cursor(code, parts[0]);
        int[] anchor = new int[1];
        TreeSet<String> names = new TreeSet<>();
        for (SourceCodeAnalysis.Suggestion suggestion : analysis.completionSuggestions(code, at, anchor)) {
            if (names.size() >= MAX_MATCHES) {
                break;
            }
            names.add(suggestion.continuation());
        }
        StringBuilder reply = new StringBuilder();
        reply.append(codePoints(code, anchor[0])).append('\0').append(codePoints(code, at));
        for (String name : names) {
            reply.append('\0').append(name);
        }
        send("matches", reply.toString());
    }

    static void inspect(SourceCodeAnalysis analysis, String body) {
        String[] parts = cursorAndCode(body);
        String code = parts[1];
        int at = cursor(code, parts[0]);
        // The documentation of what is under the cursor. JShell documents
        // the method a call opens (`Math.max(`) or the type of a name: the
        // cursor goes to the end of the name it is in, and a call is opened
        // there when the code has none.
        int end = at;
        while (end < code.length() && Character.isJavaIdentifierPart(code.charAt(end))) {
            end++;
        }
        List<SourceCodeAnalysis.Documentation> docs;
        if (end < code.length() && code.charAt(end) == '(') {
            docs = analysis.documentation(code, end + 1, false);
        } else {
            docs = analysis.documentation(code.substring(0, end) + "(" + code.substring(end), end + 1, false);
        }
        if (docs.isEmpty()) {
            docs = analysis.documentation(code, end, false);
        }
        StringBuilder text = new StringBuilder();
        for (SourceCodeAnalysis.Documentation doc : docs) {
            if (text.length() > 0) {
                text.append('\n');
            }
            text.append(doc.signature());
            if (doc.javadoc() != null && !doc.javadoc().isBlank()) {
                text.append('\n').append(doc.javadoc().strip());
            }
            if (text.length() > MAX_INSPECT) {
                text.setLength(MAX_INSPECT);
                break;
            }
        }
        send("found", text.toString());
    }

    static void isComplete(SourceCodeAnalysis analysis, String code) {
        String rest = code;
        while (true) {
            if (rest.isBlank()) {
                send("complete", "complete\0");
                return;
            }
            SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(rest);
            switch (info.completeness()) {
                case DEFINITELY_INCOMPLETE, CONSIDERED_INCOMPLETE -> {
                    send("complete", "incomplete\0    ");
                    return;
                }
                case UNKNOWN -> {
                    send("complete", "invalid\0");
                    return;
                }
                case EMPTY -> {
                    send("complete", "complete\0");
                    return;
                }
                default -> {
                    if (info.remaining().length() >= rest.length()) {
                        send("complete", "complete\0");
                        return;
                    }
                    rest = info.remaining();
                }
            }
        }
    }

    /** Sends one frame, whole, whoever else is writing. */
    static void send(String name, String payload) {
        if (script) {
            ran(name, payload);
            return;
        }
        byte[] body = payload.getBytes(StandardCharsets.UTF_8);
        byte[] head = (name + " " + body.length + "\n").getBytes(StandardCharsets.UTF_8);
        synchronized (WIRE) {
            try {
                wire.write(head);
                wire.write(body);
                wire.flush();
            } catch (IOException e) {
                // The wrapper is gone: nothing is left to answer.
                Runtime.getRuntime().halt(0);
            }
        }
    }

    /** A frame of a program run with `--run`: written as it would show. */
    static void ran(String name, String payload) {
        try {
            switch (name) {
                case "out" -> wire.write(payload.getBytes(StandardCharsets.UTF_8));
                case "err" -> REAL_ERR.write(payload.getBytes(StandardCharsets.UTF_8));
                case "error" -> {
                    failed = true;
                    String[] fields = payload.split("\0", 3);
                    String traceback = fields.length == 3 && !fields[2].isEmpty() ? fields[2]
                            : String.join(": ", java.util.Arrays.copyOf(fields, Math.min(2, fields.length))) + "\n";
                    REAL_ERR.write(traceback.getBytes(StandardCharsets.UTF_8));
                }
                default -> {
                }
            }
            wire.flush();
            REAL_ERR.flush();
        } catch (IOException e) {
            Runtime.getRuntime().halt(1);
        }
    }

    /** Reads one frame, or null at the end of input. */
    static String[] read(InputStream in) throws IOException {
        ByteArrayOutputStream head = new ByteArrayOutputStream();
        int b;
        while ((b = in.read()) != '\n') {
            if (b < 0) {
                return null;
            }
            if (head.size() > 64) {
                throw new IOException("a frame's head is too long");
            }
            head.write(b);
        }
        String[] fields = head.toString(StandardCharsets.UTF_8).split(" ", 2);
        int length = fields.length == 2 ? Integer.parseInt(fields[1].strip()) : 0;
        if (length < 0 || length > MAX_FRAME) {
            throw new IOException("a frame of " + length + " bytes");
        }
        byte[] body = in.readNBytes(length);
        if (body.length < length) {
            return null;
        }
        return new String[] {fields[0], new String(body, StandardCharsets.UTF_8)};
    }

    /**
     * A cell's System.out or System.err. A class of its own, as a Jupyter
     * kernel's stream is: the JDK then writes `println`'s text and its
     * line's end as two writes (it joins them only for PrintStream itself),
     * and each write is a frame, so a line's text arrives as E2B's Java
     * kernel gives it.
     */
    static final class CellStream extends PrintStream {
        CellStream(Framed framed) {
            super(framed, true, StandardCharsets.UTF_8);
        }
    }

    /** An output stream whose bytes go out as frames of one name. */
    static final class Framed extends OutputStream {
        final String name;
        final ByteArrayOutputStream pending = new ByteArrayOutputStream();

        Framed(String name) {
            this.name = name;
        }

        @Override
        public synchronized void write(int b) {
            pending.write(b);
            if (b == '\n' || pending.size() >= 8192) {
                flush();
            }
        }

        // What a program writes is sent as it writes it, one frame a write
        // (`println` is two: its text, then the line's end), as E2B's Java
        // kernel and a terminal show it; a single byte waits for its line,
        // its character's end or the 0.2 s flush.
        @Override
        public synchronized void write(byte[] bytes, int off, int len) {
            pending.write(bytes, off, len);
            flush();
        }

        @Override
        public synchronized void flush() {
            if (pending.size() == 0) {
                return;
            }
            // Whole UTF-8 characters only: a character split across two
            // writes waits for its end.
            byte[] bytes = pending.toByteArray();
            int end = bytes.length;
            int back = 0;
            while (back < 3 && end - back - 1 >= 0 && (bytes[end - back - 1] & 0xC0) == 0x80) {
                back++;
            }
            if (end - back - 1 >= 0) {
                int lead = bytes[end - back - 1] & 0xFF;
                int need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
                end = need > back ? end - back - 1 : end;
            }
            pending.reset();
            pending.write(bytes, end, bytes.length - end);
            if (end > 0) {
                send(name, new String(bytes, 0, end, StandardCharsets.UTF_8));
            }
        }
    }
}
