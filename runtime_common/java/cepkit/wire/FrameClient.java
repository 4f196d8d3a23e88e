package cepkit.wire;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * One reconnecting request/response connection to the harness's feed or sink, speaking the frame
 * protocol of kit/wire/protocol.py (specs/DRIVER.md): every message is
 * {@code uint32 header_len | uint32 body_len | header (UTF-8 JSON object) | body}, both lengths
 * big-endian. With the run's secret, every new connection first runs the challenge-response of
 * kit/wire/auth.py (each side's HMAC-SHA256 of both nonces, keyed by the secret): the secret
 * itself never crosses the wire.
 *
 * <p>Every request the engine makes is idempotent (reads address offsets; the sink writes each
 * (stream, epoch, batch) once), so a request cut by a lost connection is sent again on a new one
 * until {@code reconnectMs} passes, as kit/wire/connection.py does. An answer with {@code "ok":
 * false} raises at once: the engine must fail loudly, never drop or skip events. One client serves
 * one thread at a time.
 *
 * <p>Part of cepkit's one Java wire library (runtime_common/java/cepkit/wire), which both engines'
 * JVM sources and sinks use: Spark's compiled against its own Arrow and Jackson, Flink's with
 * the imports relocated to the copies Flink ships (harness/javac.py).
 */
public final class FrameClient implements AutoCloseable {
  public static final ObjectMapper JSON = new ObjectMapper();
  private static final int MAX_HEADER_BYTES = 1 << 20;

  /** One answer: its JSON header and its body (empty when the frame has none). */
  public static final class Frame {
    public final JsonNode header;
    public final byte[] body;

    Frame(JsonNode header, byte[] body) {
      this.header = header;
      this.body = body;
    }
  }

  /** The peer refused a request (its answer had "ok": false) or could not be reached in time. */
  public static final class PeerError extends IOException {
    public final String code;

    public PeerError(String code, String message) {
      super(message);
      this.code = code;
    }
  }

  private final String host;
  private final int port;
  private final String secret;
  private final String where;
  private final int timeoutMs;
  private final long reconnectMs;
  private Socket socket;
  private DataInputStream in;
  private DataOutputStream out;

  public FrameClient(String host, int port, String secret, String peer, int timeoutMs, long reconnectMs) {
    this.host = host;
    this.port = port;
    this.secret = (secret == null || secret.isEmpty()) ? null : secret;
    this.where = peer + " at " + host + ":" + port;
    this.timeoutMs = timeoutMs;
    this.reconnectMs = reconnectMs;
  }

  public String where() {
    return where;
  }

  /** Send one request and return the answer; {@code waitMs}: the peer may take this long to answer. */
  public synchronized Frame request(Map<String, Object> header, byte[] body, long waitMs) throws IOException {
    long deadline = -1;
    while (true) {
      try {
        if (socket == null) {
          connect();
        }
        socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, timeoutMs + waitMs));
        send(JSON.writeValueAsBytes(header), body);
        Frame answer = receive();
        JsonNode ok = answer.header.get("ok");
        if (ok == null || !ok.asBoolean(false)) {
          String code = answer.header.path("error").asText("error");
          String message = answer.header.path("message").asText("request failed");
          throw new PeerError(code, where + ": " + message);
        }
        return answer;
      } catch (PeerError e) {
        throw e;
      } catch (IOException e) {
        drop();
        long now = System.currentTimeMillis();
        if (deadline < 0) {
          deadline = now + reconnectMs;
        }
        if (now >= deadline) {
          throw new PeerError("unreachable", where + ": unreachable: " + e);
        }
        try {
          Thread.sleep(50);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw new IOException(where + ": interrupted while reconnecting", ie);
        }
      }
    }
  }

  private void connect() throws IOException {
    Socket s = new Socket();
    try {
      s.connect(new InetSocketAddress(host, port), timeoutMs);
      // Small requests and answers must not wait for Nagle's algorithm.
      s.setTcpNoDelay(true);
      socket = s;
      in = new DataInputStream(new BufferedInputStream(s.getInputStream(), 1 << 16));
      out = new DataOutputStream(new BufferedOutputStream(s.getOutputStream(), 1 << 16));
      if (secret != null) {
        // The challenge-response of kit/wire/auth.py: the secret never crosses the wire.
        String clientNonce = newNonce();
        send(JSON.writeValueAsBytes(Map.of("op", "auth", "nonce", clientNonce)), null);
        Frame challenge = receive();
        refuseUnlessOk(challenge);
        String serverNonce = challenge.header.path("nonce").asText("");
        String serverProof = challenge.header.path("proof").asText("");
        if (!serverNonce.matches("[0-9a-f]{32}") || !java.security.MessageDigest.isEqual(
            proof("server", clientNonce, serverNonce).getBytes(StandardCharsets.US_ASCII),
            serverProof.getBytes(StandardCharsets.US_ASCII))) {
          drop();
          throw new PeerError("unauthorized", where + ": the server's proof does not match this client's "
              + "secret (a wrong secret here, a server started without one, or not the run's server)");
        }
        send(JSON.writeValueAsBytes(Map.of("op", "auth", "proof", proof("client", clientNonce, serverNonce))), null);
        refuseUnlessOk(receive());
      }
    } catch (IOException e) {
      if (socket == null) {
        s.close();
      }
      throw e;
    }
  }

  private void refuseUnlessOk(Frame answer) throws PeerError {
    if (!answer.header.path("ok").asBoolean(false)) {
      drop();
      throw new PeerError("unauthorized", where + ": "
          + answer.header.path("message").asText("the connection was refused"));
    }
  }

  /** 128 random bits as 32 lowercase hex digits. */
  private static String newNonce() {
    byte[] bytes = new byte[16];
    new java.security.SecureRandom().nextBytes(bytes);
    return java.util.HexFormat.of().formatHex(bytes);
  }

  /** HMAC-SHA256 keyed by the secret of {@code cepkit-auth ROLE CN SN}, as lowercase hex. */
  private String proof(String role, String clientNonce, String serverNonce) throws IOException {
    try {
      javax.crypto.Mac mac = javax.crypto.Mac.getInstance("HmacSHA256");
      mac.init(new javax.crypto.spec.SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
      byte[] digest = mac.doFinal(("cepkit-auth " + role + " " + clientNonce + " " + serverNonce)
          .getBytes(StandardCharsets.UTF_8));
      return java.util.HexFormat.of().formatHex(digest);
    } catch (java.security.GeneralSecurityException e) {
      throw new IOException(where + ": cannot compute the auth proof: " + e, e);
    }
  }

  private void send(byte[] head, byte[] body) throws IOException {
    int size = body == null ? 0 : body.length;
    out.writeInt(head.length);
    out.writeInt(size);
    out.write(head);
    if (size > 0) {
      out.write(body);
    }
    out.flush();
  }

  private Frame receive() throws IOException {
    int headLen;
    try {
      headLen = in.readInt();
    } catch (EOFException e) {
      throw new IOException("connection closed by the peer", e);
    }
    long bodyLen = Integer.toUnsignedLong(in.readInt());
    if (headLen < 0 || headLen > MAX_HEADER_BYTES) {
      drop();
      throw new PeerError("protocol", where + ": frame header of " + Integer.toUnsignedLong(headLen)
          + " bytes exceeds " + MAX_HEADER_BYTES);
    }
    if (bodyLen > Integer.MAX_VALUE - 16) {
      drop();
      throw new PeerError("protocol", where + ": frame body of " + bodyLen + " bytes is too large");
    }
    byte[] head = new byte[headLen];
    in.readFully(head);
    byte[] body = new byte[(int) bodyLen];
    in.readFully(body);
    JsonNode header;
    try {
      header = JSON.readTree(new String(head, StandardCharsets.UTF_8));
    } catch (IOException e) {
      drop();
      throw new PeerError("protocol", where + ": frame header is not JSON: " + e.getMessage());
    }
    if (header == null || !header.isObject()) {
      drop();
      throw new PeerError("protocol", where + ": frame header is not a JSON object");
    }
    return new Frame(header, body);
  }

  private void drop() {
    if (socket != null) {
      try {
        socket.close();
      } catch (IOException ignored) {
        // closing a broken socket: nothing more to do
      }
    }
    socket = null;
    in = null;
    out = null;
  }

  @Override
  public synchronized void close() {
    drop();
  }
}
