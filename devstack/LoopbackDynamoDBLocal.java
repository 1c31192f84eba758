// DynamoDB Local bound to one address. Its command line has no bind option (it listens on every
// interface), so this launcher builds the server the way `java -jar DynamoDBLocal.jar` does,
// sets the host on its Jetty connector, then starts it. devstack/dynamodb_local.py compiles it once
// per source, jar and JDK into ~/.cache/tally (nothing to commit) and runs the class; without javac
// it runs from source (java 11+ single-file mode, compiled again in each JVM):
//   java -cp DynamoDBLocal.jar:DynamoDBLocal_lib/* LoopbackDynamoDBLocal.java 127.0.0.1 -inMemory -port 8000
import java.lang.reflect.Field;
import java.util.Arrays;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(Arrays.copyOfRange(args, 1, args.length));
        Field field = DynamoDBProxyServer.class.getDeclaredField("server"); // private; no setter exists
        field.setAccessible(true);
        for (Connector connector : ((Server) field.get(proxy)).getConnectors()) {
            ((ServerConnector) connector).setHost(host);
        }
        proxy.start();
        proxy.join();
    }
}
