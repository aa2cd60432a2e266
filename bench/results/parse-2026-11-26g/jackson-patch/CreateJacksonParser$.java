package org.apache.spark.sql.catalyst.json;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.Reader;
import java.io.UnsupportedEncodingException;
import java.nio.ByteBuffer;
import java.nio.charset.Charset;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import org.apache.hadoop.io.Text;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;

public final class CreateJacksonParser$ implements java.io.Serializable {
  public static final CreateJacksonParser$ MODULE$ = new CreateJacksonParser$();

  private CreateJacksonParser$() {}

  public JsonParser string(JsonFactory f, String record) throws java.io.IOException {
    return f.createParser(record);
  }

  public JsonParser utf8String(JsonFactory f, UTF8String record) throws java.io.IOException {
    ByteBuffer bb = record.getByteBuffer();
    if (bb.hasArray()) {
      return f.createParser(bb.array(), bb.arrayOffset() + bb.position(), bb.remaining());
    }
    return f.createParser(record.getBytes());
  }

  public JsonParser text(JsonFactory f, Text record) throws java.io.IOException {
    return f.createParser(record.getBytes(), 0, record.getLength());
  }

  private Reader getStreamDecoder(String enc, byte[] in, int length) {
    return new InputStreamReader(new ByteArrayInputStream(in, 0, length), Charset.forName(enc));
  }

  public JsonParser text(String enc, JsonFactory f, Text record) throws java.io.IOException {
    return f.createParser(getStreamDecoder(enc, record.getBytes(), record.getLength()));
  }

  public JsonParser inputStream(JsonFactory f, InputStream is) throws java.io.IOException {
    return f.createParser(is);
  }

  public JsonParser inputStream(String enc, JsonFactory f, InputStream is) throws java.io.IOException {
    return f.createParser(new InputStreamReader(is, enc));
  }

  public JsonParser internalRow(JsonFactory f, InternalRow row) throws java.io.IOException {
    byte[] ba = row.getBinary(0);
    return f.createParser(ba, 0, ba.length);
  }

  public JsonParser internalRow(String enc, JsonFactory f, InternalRow row) throws java.io.IOException {
    byte[] ba = row.getBinary(0);
    return f.createParser(getStreamDecoder(enc, ba, ba.length));
  }

  private Object writeReplace() {
    return new scala.runtime.ModuleSerializationProxy(CreateJacksonParser$.class);
  }
}
