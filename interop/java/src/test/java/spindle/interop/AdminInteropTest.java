package spindle.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.seagate.kinetic.proto.Kinetic.Command.Status.StatusCode;

import kinetic.admin.Capacity;
import kinetic.admin.Configuration;
import kinetic.admin.KineticAdminClient;
import kinetic.admin.KineticLog;
import kinetic.admin.KineticLogType;
import kinetic.admin.Limits;
import kinetic.admin.Statistics;
import kinetic.admin.Temperature;
import kinetic.admin.Utilization;
import kinetic.client.EntryNotFoundException;
import kinetic.client.KineticException;

/** GETLOG through the admin client on the plain (non-TLS) port. */
class AdminInteropTest extends InteropSupport {

    private KineticAdminClient admin;

    @BeforeAll
    void connectAdmin() throws KineticException {
        admin = adminClient();
    }

    @AfterAll
    void closeAdmin() throws KineticException {
        if (admin != null) {
            admin.close();
        }
    }

    private static final Set<KineticLogType> ALL_BUT_DEVICE = EnumSet.of(
            KineticLogType.UTILIZATIONS, KineticLogType.TEMPERATURES, KineticLogType.CAPACITIES,
            KineticLogType.CONFIGURATION, KineticLogType.STATISTICS, KineticLogType.MESSAGES,
            KineticLogType.LIMITS);

    private static Set<KineticLogType> contained(KineticLog log) throws KineticException {
        KineticLogType[] types = log.getContainedLogTypes();
        assertNotNull(types, "contained log types");
        Set<KineticLogType> set = EnumSet.noneOf(KineticLogType.class);
        set.addAll(Arrays.asList(types));
        return set;
    }

    private static void checkLimits(Limits limits) {
        assertNotNull(limits, "limits");
        assertEquals(4096, limits.getMaxKeySize(), "maxKeySize");
        assertEquals(1048576, limits.getMaxValueSize(), "maxValueSize");
        assertEquals(2048, limits.getMaxVersionSize(), "maxVersionSize");
        assertEquals(200, limits.getMaxKeyRangeCount(), "maxKeyRangeCount");
    }

    @Test
    void getLogAllTypes() throws Exception {
        client.noop(); // so that statistics have something to count
        KineticLog log = admin.getLog();
        assertNotNull(log);
        assertTrue(contained(log).containsAll(ALL_BUT_DEVICE), "types: " + contained(log));

        Capacity capacity = log.getCapacity();
        assertNotNull(capacity, "capacities");
        assertTrue(capacity.getNominalCapacityInBytes() > 0, "nominal capacity");
        assertTrue(capacity.getPortionFull() >= 0f && capacity.getPortionFull() <= 1f,
                "portionFull in [0,1]: " + capacity.getPortionFull());

        List<Utilization> utilizations = log.getUtilization();
        assertNotNull(utilizations);
        assertFalse(utilizations.isEmpty(), "utilizations");
        for (Utilization u : utilizations) {
            assertNotNull(u.getName());
            assertFalse(u.getName().isEmpty(), "utilization name");
            assertTrue(u.getUtility() >= 0f && u.getUtility() <= 1f,
                    u.getName() + " utility in [0,1]: " + u.getUtility());
        }

        List<Temperature> temperatures = log.getTemperature();
        assertNotNull(temperatures);
        assertFalse(temperatures.isEmpty(), "temperatures");
        for (Temperature t : temperatures) {
            assertNotNull(t.getName());
            assertFalse(t.getName().isEmpty(), "temperature name");
        }

        Configuration config = log.getConfiguration();
        assertNotNull(config, "configuration");
        assertNonEmpty(config.getVendor(), "vendor");
        assertNonEmpty(config.getModel(), "model");
        assertNonEmpty(config.getSerialNumber(), "serialNumber");
        assertNonEmpty(config.getWorldWideName(), "worldWideName");
        assertNonEmpty(config.getVersion(), "version");
        assertNonEmpty(config.getProtocolVersion(), "protocolVersion");
        assertEquals(PORT, config.getPort(), "configuration.port is the port we are connected to");
        assertTrue(config.getTlsPort() > 0, "configuration.tlsPort");

        List<Statistics> statistics = log.getStatistics();
        assertNotNull(statistics);
        assertFalse(statistics.isEmpty(), "statistics");
        assertTrue(statistics.stream().anyMatch(s -> s.getCount() > 0),
                "some message type has a non-zero count");

        assertNotNull(log.getMessages(), "messages");

        checkLimits(log.getLimits());
    }

    @Test
    void getLogSelectedTypes() throws Exception {
        KineticLog log = admin.getLog(List.of(KineticLogType.LIMITS, KineticLogType.CAPACITIES));
        assertEquals(EnumSet.of(KineticLogType.LIMITS, KineticLogType.CAPACITIES), contained(log));
        checkLimits(log.getLimits());
        assertTrue(log.getCapacity().getNominalCapacityInBytes() > 0);

        log = admin.getLog(List.of(KineticLogType.CONFIGURATION));
        assertEquals(EnumSet.of(KineticLogType.CONFIGURATION), contained(log));
        assertNonEmpty(log.getConfiguration().getVendor(), "vendor");

        log = admin.getLog(List.of(KineticLogType.UTILIZATIONS, KineticLogType.TEMPERATURES,
                KineticLogType.STATISTICS, KineticLogType.MESSAGES));
        assertEquals(EnumSet.of(KineticLogType.UTILIZATIONS, KineticLogType.TEMPERATURES,
                KineticLogType.STATISTICS, KineticLogType.MESSAGES), contained(log));
        assertFalse(log.getUtilization().isEmpty());
        assertFalse(log.getTemperature().isEmpty());
        assertFalse(log.getStatistics().isEmpty());
        assertNotNull(log.getMessages());
    }

    @Test
    void vendorSpecificDeviceLogUnknownNameIsNotFound() {
        KineticException e = assertThrows(KineticException.class,
                () -> admin.getVendorSpecificDeviceLog(bytes("com.spindle.interop:no-such-log")));
        assertTrue(hasCause(e, EntryNotFoundException.class) || statusOf(e) == StatusCode.NOT_FOUND,
                "NOT_FOUND, got " + statusOf(e) + ": " + e);
    }

    private static void assertNonEmpty(String s, String what) {
        assertNotNull(s, what);
        assertFalse(s.isEmpty(), what + " is empty");
    }
}
